"""What a request body declares its output must look like: a schema per tool (by function name) and one
for the text content. Read from the request formats the middleware streams:

- OpenAI chat: ``tools[].function.parameters`` (and the older ``functions[].parameters``); ``response_format``
  ``{"type": "json_schema", "json_schema": {"schema": ...}}`` or ``{"type": "json_object"}``.
- OpenAI Responses: ``tools[]`` of ``type: "function"`` with ``name`` and ``parameters``; ``text.format`` of
  type ``json_schema`` (``schema``) or ``json_object``.
- Anthropic: ``tools[].input_schema`` by ``name``.
- AG-UI: a ``RunAgentInput``'s ``tools[]``, ``parameters`` by ``name`` (read as the Responses shape: no
  ``type``, which means a function); its text has no declared schema.

The body is whatever JSON the app read, so nothing here trusts a type: a part of the wrong shape means no
check for that part, never an exception. Schemas are returned as declared; compiling them (which may raise
``SchemaError``) is the caller's step, so a bad schema disables only its own check.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from .checker import JsonChecker
from .schema import compile_schema


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


NO_CHECK: Final = _Marker("NO_CHECK")  # nothing declared: the output is not checked
SYNTAX_ONLY: Final = _Marker("SYNTAX_ONLY")  # JSON mode: any valid JSON document
_AMBIGUOUS: Final = _Marker("AMBIGUOUS")  # two tools of one name with different schemas


@dataclasses.dataclass(frozen=True, slots=True)
class DeclaredSchemas:
    """The schemas one request declares. Empty (falsy) when it declares none."""

    tools: Mapping[str, object] = dataclasses.field(default_factory=lambda: MappingProxyType({}))
    content: object | None = None  # a schema, SYNTAX_ONLY, or None

    def for_tool(self, name: str) -> object:
        """The schema of the tool called ``name``'s arguments, or ``NO_CHECK``."""
        schema = self.tools.get(name, NO_CHECK)
        return NO_CHECK if schema is _AMBIGUOUS else schema

    def __bool__(self) -> bool:
        return self.content is not None or any(value is not _AMBIGUOUS for value in self.tools.values())


def declared_schemas(body: object) -> DeclaredSchemas:
    """The schemas ``body`` (a parsed JSON request body, of any shape) declares."""
    if not isinstance(body, Mapping):
        return DeclaredSchemas()
    tools: dict[str, object] = {}
    for entry in _list(body.get("tools")) + _list(body.get("functions")):
        found = _tool(entry)
        if found is not None:
            name, schema = found
            earlier = tools.get(name)
            tools[name] = schema if earlier is None or earlier == schema else _AMBIGUOUS
    return DeclaredSchemas(MappingProxyType(tools), _content(body))


def checker_for(declared: object) -> JsonChecker | None:
    """A fresh checker for what ``for_tool`` or ``content`` returned; ``None`` for no check. Raises
    ``SchemaError`` for a schema the checker cannot read."""
    if declared is None or declared is NO_CHECK or declared is _AMBIGUOUS:
        return None
    if declared is SYNTAX_ONLY:
        return JsonChecker(None)
    return JsonChecker(compile_schema(declared))


def _tool(entry: object) -> tuple[str, object] | None:
    if not isinstance(entry, Mapping):
        return None
    function = entry.get("function")
    if isinstance(function, Mapping):  # OpenAI chat
        name, schema = function.get("name"), function.get("parameters")
    elif "input_schema" in entry:  # Anthropic
        name, schema = entry.get("name"), entry.get("input_schema")
    elif entry.get("type", "function") == "function":  # OpenAI Responses, or chat's older `functions`
        name, schema = entry.get("name"), entry.get("parameters")
    else:
        return None
    if isinstance(name, str) and isinstance(schema, (Mapping, bool)):
        return name, schema
    return None


def _content(body: Mapping[str, Any]) -> object | None:
    response_format = body.get("response_format")  # OpenAI chat
    if isinstance(response_format, Mapping):
        inner = response_format.get("json_schema")
        found = _format(response_format, inner.get("schema") if isinstance(inner, Mapping) else None)
        if found is not None:
            return found
    text = body.get("text")  # OpenAI Responses
    text_format = text.get("format") if isinstance(text, Mapping) else None
    if isinstance(text_format, Mapping):
        return _format(text_format, text_format.get("schema"))
    return None


def _format(declared: Mapping[str, Any], schema: object) -> object | None:
    kind = declared.get("type")
    if kind == "json_object":
        return SYNTAX_ONLY
    if kind == "json_schema" and isinstance(schema, (Mapping, bool)):
        return schema
    return None


def _list(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else []
