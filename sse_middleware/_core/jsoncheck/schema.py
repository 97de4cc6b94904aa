"""A JSON Schema read (its keywords, its local ``$ref`` pointers) and compiled into the few facts the
incremental checker evaluates on a prefix: the nodes of ``compiled.py``.

Only a subset is evaluated (see ``EVALUATED``); every other keyword is kept out of the compiled form, so it
can never fail a document. A node that carries such a keyword, or reaches one, is marked *inexact*: the
checker may then prove that it fails, never that it matches (which is what ``oneOf``'s "more than one"
needs). A schema the checker cannot read raises :class:`~sse_middleware._exceptions.SchemaError`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import unquote

from ..._exceptions import SchemaError
from .compiled import CompiledSchema, Node, mark_exact, reject_empty_cycles

KINDS: Final = ("null", "boolean", "object", "array", "string", "number")
TYPE_NAMES: Final = frozenset((*KINDS, "integer"))

EVALUATED: Final = frozenset(
    {
        "type",
        "nullable",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "prefixItems",
        "additionalItems",
        "enum",
        "const",
        "minLength",
        "maxLength",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minItems",
        "maxItems",
        "anyOf",
        "oneOf",
        "allOf",
        "$ref",
    }
)
# Keywords that never make a document invalid: annotations, and containers of definitions.
ANNOTATIONS: Final = frozenset(
    {
        "$schema",
        "$id",
        "$defs",
        "definitions",
        "$comment",
        "$anchor",
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$vocabulary",
    }
)
_OLD_DRAFTS: Final = ("draft-07", "draft-06", "draft-04", "draft-03")  # there, ``$ref`` hides its siblings


def compile_schema(schema: object) -> CompiledSchema:
    """Compile ``schema`` (a parsed JSON value) or raise ``SchemaError`` saying why it cannot be read."""
    compiler = _Compiler(schema)
    root = compiler.node(schema, "#")
    nodes = compiler.all_nodes()
    reject_empty_cycles(nodes)
    mark_exact(nodes)
    key_cap = max((len(name) for node in nodes for name in (*node.properties, *node.required)), default=0)
    return CompiledSchema(root, key_cap)


class _Compiler:
    def __init__(self, root: object) -> None:
        self.root = root
        self.memo: dict[int, Node] = {}
        self.keep: list[object] = []  # the compiled dicts stay referenced, so their ids stay unique
        schema_uri = root.get("$schema", "") if isinstance(root, Mapping) else ""
        self.old_draft = isinstance(schema_uri, str) and any(d in schema_uri for d in _OLD_DRAFTS)

    def all_nodes(self) -> list[Node]:
        return list(self.memo.values())

    def node(self, schema: object, where: str) -> Node:
        if isinstance(schema, bool):
            return self._boolean(schema, where)
        if not isinstance(schema, Mapping):
            raise SchemaError(f"the schema at {where} is {type(schema).__name__}, not an object or boolean")
        known = self.memo.get(id(schema))
        if known is not None:
            return known
        node = Node(where)
        self.memo[id(schema)] = node
        self.keep.append(schema)
        if where != "#" and isinstance(schema.get("$id"), str) and not schema["$id"].startswith("#"):
            raise SchemaError(f"the schema at {where} has its own $id: embedded resources are not supported")
        ref = schema.get("$ref")
        if isinstance(ref, str):
            node.all_of = (self.node(self._resolve(ref, where), ref),)
            if self.old_draft:
                return node
        self._fill(node, schema, where)
        return node

    def _boolean(self, value: bool, where: str) -> Node:
        node = Node(where)
        node.never = not value
        self.memo[id(node)] = node  # listed among all nodes; a bool has no identity of its own
        return node

    def _resolve(self, ref: str, where: str) -> object:
        if ref == "#" or ref == "":
            return self.root
        if not ref.startswith("#/"):
            raise SchemaError(f"the $ref {ref!r} at {where} is not local (only #, #/$defs/... are read)")
        target: object = self.root
        for raw in ref[2:].split("/"):
            part = unquote(raw).replace("~1", "/").replace("~0", "~")
            if isinstance(target, Mapping) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                raise SchemaError(f"the $ref {ref!r} at {where} does not resolve")
        return target

    def _fill(self, node: Node, schema: Mapping[str, Any], where: str) -> None:
        unknown = set(schema) - EVALUATED - ANNOTATIONS
        node.local_exact = not unknown
        self._types(node, schema)
        self._values(node, schema)
        self._numbers(node, schema)
        self._objects(node, schema, where)
        self._arrays(node, schema, where)
        for word in ("anyOf", "oneOf", "allOf"):
            branches = schema.get(word)
            if isinstance(branches, list) and branches:
                compiled = tuple(self.node(sub, f"{where}/{word}/{i}") for i, sub in enumerate(branches))
                if word == "allOf":
                    node.all_of += compiled
                elif word == "anyOf":
                    node.any_of += (compiled,)
                else:
                    node.one_of += (compiled,)
            elif word in schema:
                node.local_exact = False

    def _types(self, node: Node, schema: Mapping[str, Any]) -> None:
        declared = schema.get("type")
        names = [declared] if isinstance(declared, str) else declared
        if isinstance(names, list) and all(isinstance(name, str) for name in names):
            bad = [name for name in names if name not in TYPE_NAMES]
            if bad:
                raise SchemaError(f"unknown type {bad[0]!r} at {node.where}")
            node.types = frozenset(names)
        elif declared is not None:
            node.local_exact = False
        if node.types is not None and schema.get("nullable") is True:
            node.types |= {"null"}  # OpenAPI's spelling; jsonschema ignores it, so allowing null is lenient

    def _values(self, node: Node, schema: Mapping[str, Any]) -> None:
        enum = schema.get("enum")
        if isinstance(enum, list):
            node.enum = tuple(enum)
        elif "enum" in schema:
            node.local_exact = False
        if "const" in schema:
            const = schema["const"]
            enum = (const,) if node.enum is None else tuple(v for v in node.enum if json_equal(v, const))
            node.enum = enum
        if node.enum is not None and schema.get("nullable") is True and None not in node.enum:
            node.enum += (None,)
        for word, attribute in (("minLength", "min_length"), ("maxLength", "max_length")):
            setattr(node, attribute, self._count(node, schema, word))

    def _numbers(self, node: Node, schema: Mapping[str, Any]) -> None:
        for word, attribute in (
            ("minimum", "minimum"),
            ("maximum", "maximum"),
            ("exclusiveMinimum", "exclusive_minimum"),
            ("exclusiveMaximum", "exclusive_maximum"),
        ):
            value = schema.get(word)
            if _is_number(value) and not (isinstance(value, float) and math.isnan(value)):
                setattr(node, attribute, value)
            elif word in schema:
                node.local_exact = False  # e.g. draft 4's boolean exclusiveMaximum

    def _objects(self, node: Node, schema: Mapping[str, Any], where: str) -> None:
        properties = schema.get("properties")
        if isinstance(properties, Mapping):
            node.properties = {
                str(name): self.node(sub, f"{where}/properties/{name}") for name, sub in properties.items()
            }
            node.names = tuple(sorted(node.properties))
        elif "properties" in schema:
            node.local_exact = False
        required = schema.get("required")
        if isinstance(required, list) and all(isinstance(name, str) for name in required):
            node.required = frozenset(required)
        elif "required" in schema:
            node.local_exact = False
        additional = schema.get("additionalProperties")
        if additional is not None and "patternProperties" not in schema:
            node.additional = self.node(additional, f"{where}/additionalProperties")

    def _arrays(self, node: Node, schema: Mapping[str, Any], where: str) -> None:
        prefix = schema.get("prefixItems")
        items = schema.get("items")
        if isinstance(items, list):  # draft 7's tuple form; additionalItems then covers the rest
            prefix, items = items, schema.get("additionalItems")
        if isinstance(prefix, list):
            node.prefix_items = tuple(
                self.node(sub, f"{where}/prefixItems/{index}") for index, sub in enumerate(prefix)
            )
        if items is not None:
            node.items = self.node(items, f"{where}/items")
        node.min_items = self._count(node, schema, "minItems")
        node.max_items = self._count(node, schema, "maxItems")

    @staticmethod
    def _count(node: Node, schema: Mapping[str, Any], word: str) -> int | None:
        value = schema.get(word)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        if word in schema:
            node.local_exact = False
        return None


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def json_equal(one: object, two: object) -> bool:
    """Equality as JSON Schema (and jsonschema) sees it: ``1 == 1.0``, but ``true != 1``."""
    if isinstance(one, bool) or isinstance(two, bool):
        return isinstance(one, bool) and isinstance(two, bool) and one == two
    if isinstance(one, str) or isinstance(two, str):
        return one == two
    if isinstance(one, list) and isinstance(two, list):
        return len(one) == len(two) and all(json_equal(a, b) for a, b in zip(one, two, strict=True))
    if isinstance(one, Mapping) and isinstance(two, Mapping):
        return one.keys() == two.keys() and all(json_equal(one[k], two[k]) for k in one)
    if _is_number(one) and _is_number(two):
        return bool(one == two)
    return one is None and two is None
