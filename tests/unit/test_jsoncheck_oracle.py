"""The checker against an oracle nobody here wrote: ``jsonschema``'s Draft 2020-12 validator.

For generated schemas of the evaluated subset and generated documents, under any chunking: a document the
oracle accepts never faults; one it rejects faults, at the latest at ``close()``. And by construction, a
valid document with one value swapped for a value of a kind the schema forbids there faults exactly at that
value's first character: no earlier (the prefix before it can still be completed validly, by the original
document), no later (the first character already says the kind)."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sse_middleware._core.jsoncheck import SCHEMA, Fault, JsonChecker, compile_schema
from tests.support import tier

NAMES = st.sampled_from(["a", "b", "days", "unit", "é", "k y", ""])
TEXT = st.text(alphabet=st.sampled_from('ab"\\/\n\x01é€😀 '), max_size=6)
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.sampled_from([0.5, 1.0, -2.0, 1e3]), TEXT
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=3),
    max_leaves=6,
)
TYPES = st.sampled_from(["string", "integer", "number", "boolean", "null", "object", "array"])
SMALL = st.integers(0, 4)
SETTINGS = settings(
    max_examples=tier.examples(400),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _leaf() -> st.SearchStrategy[Any]:
    bound = st.sampled_from([-1, 0, 1, 2.5, 3])
    return st.one_of(
        st.builds(lambda t: {"type": t}, TYPES),
        st.builds(lambda t: {"type": t}, st.lists(TYPES, min_size=1, max_size=3, unique=True)),
        st.fixed_dictionaries({"type": st.just("string")}, optional={"minLength": SMALL, "maxLength": SMALL}),
        st.fixed_dictionaries(
            {"type": st.sampled_from(["integer", "number"])},
            optional={
                "minimum": bound,
                "maximum": bound,
                "exclusiveMinimum": bound,
                "exclusiveMaximum": bound,
            },
        ),
        st.builds(lambda values: {"enum": values}, st.lists(SCALARS, min_size=1, max_size=4)),
        st.builds(lambda value: {"const": value}, SCALARS),
        st.booleans(),
        st.just({}),
    )


def _objects(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Object schemas over ``inner``, spelled the same in every draft."""
    return st.fixed_dictionaries(
        {"type": st.just("object"), "properties": st.dictionaries(NAMES, inner, max_size=3)},
        optional={
            "required": st.lists(NAMES, max_size=2, unique=True),
            "additionalProperties": st.one_of(st.just(False), inner),
        },
    )


def _compound(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        _objects(inner),
        st.fixed_dictionaries(
            {"type": st.just("array")},
            optional={
                "items": inner,
                "prefixItems": st.lists(inner, max_size=2),
                "minItems": SMALL,
                "maxItems": SMALL,
            },
        ),
        st.builds(
            lambda word, branches: {word: branches},
            st.sampled_from(["anyOf", "oneOf", "allOf"]),
            st.lists(inner, min_size=1, max_size=3),
        ),
    )


_TREES = st.recursive(_leaf(), _compound, max_leaves=6)
# a local $ref resolves against the root, so the definitions live there
SCHEMAS = _TREES | st.builds(lambda target: {"$defs": {"d": target}, "$ref": "#/$defs/d"}, _TREES)


@st.composite
def instance_of(draw: st.DrawFn, schema: Any, depth: int = 0) -> Any:
    """A value that tries to match ``schema`` (the oracle has the last word), now and then anything."""
    if isinstance(schema, bool) or depth > 4 or draw(st.integers(0, 9)) == 0:
        return draw(JSON)
    if "$ref" in schema:
        return draw(instance_of(schema["$defs"]["d"], depth + 1))
    if "enum" in schema:
        return draw(st.sampled_from(schema["enum"]))
    if "const" in schema:
        return schema["const"]
    for word in ("anyOf", "oneOf", "allOf"):
        if word in schema:
            return draw(instance_of(draw(st.sampled_from(schema[word])), depth + 1))
    kind = schema.get("type")
    kind = draw(st.sampled_from(kind)) if isinstance(kind, list) else kind
    if kind == "object":
        properties = schema.get("properties", {})
        names = set(schema.get("required", [])) | set(
            draw(st.lists(st.sampled_from(sorted(properties) or [""]), max_size=3))
        )
        return {name: draw(instance_of(properties.get(name, True), depth + 1)) for name in names}
    if kind == "array":
        prefix = [draw(instance_of(sub, depth + 1)) for sub in schema.get("prefixItems", [])]
        rest = draw(st.lists(instance_of(schema.get("items", True), depth + 1), max_size=3))
        return prefix + rest
    if kind == "string":
        shortest = schema.get("minLength", 0)
        return draw(
            st.text(
                alphabet=st.sampled_from('a"\\é😀\n'),
                min_size=shortest,
                max_size=max(shortest, schema.get("maxLength", 5)),
            )
        )
    if kind in ("integer", "number"):
        return draw(st.integers(-3, 4) | st.sampled_from([1.0, 2.5, -0.5, 3e0]))
    return {"boolean": draw(st.booleans()), "null": None}.get(kind, draw(JSON)) if kind else draw(JSON)


def _render(draw: st.DrawFn, value: Any) -> str:
    ascii_only = draw(st.booleans())
    indent = draw(st.sampled_from([None, None, 2]))
    return json.dumps(value, ensure_ascii=ascii_only, indent=indent)


def _check(checker: JsonChecker, text: str, cuts: list[int]) -> Fault | None:
    start = 0
    for cut in [*sorted(cuts), len(text)]:
        fault = checker.feed(text[start:cut])
        if fault is not None:
            return fault
        start = max(start, cut)
    return checker.close()


def _valid(schema: Any, text: str) -> bool:
    return bool(jsonschema.Draft202012Validator(schema).is_valid(json.loads(text)))


@SETTINGS
@given(st.data())
def test_agrees_with_jsonschema_under_any_chunking(data: st.DataObject) -> None:
    schema = data.draw(SCHEMAS)
    text = _render(data.draw, data.draw(instance_of(schema)))
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=6))
    checker = JsonChecker(compile_schema(schema))
    fault = _check(checker, text, cuts)
    if _valid(schema, text):
        assert fault is None, (schema, text, fault)
        assert checker.done
    else:
        assert fault is not None and fault.code == SCHEMA, (schema, text)
        assert fault.offset <= len(text)


WRONG = {
    "string": 7,
    "integer": "x",
    "number": [1],
    "boolean": None,
    "null": {"a": 1},
    "object": True,
    "array": 0.5,
}


@SETTINGS
@given(st.data())
def test_a_wrong_kind_faults_at_its_first_character(data: st.DataObject) -> None:
    """The construction: a valid document, then one value at a known place swapped for a wrong kind."""
    inner = data.draw(st.dictionaries(NAMES, st.builds(lambda t: {"type": t}, TYPES), min_size=1, max_size=4))
    schema = {
        "type": "object",
        "properties": {"outer": {"type": "array", "items": {"type": "object", "properties": inner}}},
    }
    good = data.draw(instance_of({"type": "object", "properties": inner, "required": sorted(inner)}))
    assume(isinstance(good, dict) and set(good) == set(inner))
    target = data.draw(st.sampled_from(sorted(inner)))
    kind = inner[target]["type"]
    document = {"outer": [good, {**good, target: "@@BAD@@"}]}
    text = _render(data.draw, document)
    bad = json.dumps(WRONG[kind])
    start = text.index('"@@BAD@@"')
    text = text[:start] + bad + text[start + len('"@@BAD@@"') :]
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=6))
    # the construction needs a valid original
    assume(_valid(schema, text[:start] + json.dumps(good[target]) + text[start + len(bad) :]))
    assert not _valid(schema, text)
    fault = _check(JsonChecker(compile_schema(schema)), text, cuts)
    assert fault is not None and fault.code == SCHEMA
    assert fault.offset == start, (text, fault)


def _compound_draft7(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Draft 7's spellings: array-form ``items`` with ``additionalItems``, no ``prefixItems``."""
    return st.one_of(
        _objects(inner),
        st.fixed_dictionaries(
            {"type": st.just("array"), "items": st.lists(inner, max_size=3)},
            optional={"additionalItems": inner, "maxItems": SMALL},
        ),
        st.fixed_dictionaries({"type": st.just("array")}, optional={"items": inner, "minItems": SMALL}),
        st.builds(
            lambda word, branches: {word: branches},
            st.sampled_from(["anyOf", "oneOf", "allOf"]),
            st.lists(inner, min_size=1, max_size=3),
        ),
    )


_DRAFT7 = "http://json-schema.org/draft-07/schema#"
_TREES_DRAFT7 = st.recursive(_leaf(), _compound_draft7, max_leaves=6)
SCHEMAS_DRAFT7 = st.builds(
    lambda target, referenced: (
        {"$schema": _DRAFT7, "definitions": {"d": target}, "$ref": "#/definitions/d"}
        if referenced
        else target
        if isinstance(target, bool)
        else {"$schema": _DRAFT7, **target}
    ),
    _TREES_DRAFT7,
    st.booleans(),
)


def _draft7_instance(schema: Any) -> Any:
    """The 2020-12 generator's view of a Draft 7 schema: array-form items become prefixItems."""
    if isinstance(schema, list):
        return [_draft7_instance(sub) for sub in schema]
    if not isinstance(schema, dict):
        return schema
    view = {word: _draft7_instance(value) for word, value in schema.items()}
    if "definitions" in view:
        view["$defs"] = view.pop("definitions")
    if isinstance(view.get("items"), list):
        view["prefixItems"] = view.pop("items")
        if "additionalItems" in view:
            view["items"] = view.pop("additionalItems")
    return view


@SETTINGS
@given(st.data())
def test_agrees_with_jsonschema_draft7(data: st.DataObject) -> None:
    schema = data.draw(SCHEMAS_DRAFT7)
    text = _render(data.draw, data.draw(instance_of(_draft7_instance(schema))))
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=6))
    fault = _check(JsonChecker(compile_schema(schema)), text, cuts)
    if jsonschema.Draft7Validator(schema).is_valid(json.loads(text)):
        assert fault is None, (schema, text, fault)
    else:
        assert fault is not None and fault.code == SCHEMA, (schema, text)
