"""Each evaluated keyword's earliest fault, exactly where it is: the offset of the character that proves it
(the character itself, or for a value only judged whole, the one that ends it), the path, the message;
the schemas the checker cannot read; what it leaves alone. Each case is also fed one character at a time:
the answer may not depend on the chunking."""

from __future__ import annotations

from typing import Any

import pytest

from sse_middleware._core.jsoncheck import SCHEMA, SYNTAX, Fault, JsonChecker, compile_schema
from sse_middleware._exceptions import SchemaError, SSEMiddlewareError

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer"},
        "unit": {"enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city", "days"],
    "additionalProperties": False,
}


def _run(schema: Any, text: str, by_char: bool = False) -> Fault | None:
    checker = JsonChecker(compile_schema(schema) if schema is not None else None)
    for piece in list(text) if by_char else [text]:
        fault = checker.feed(piece)
        if fault is not None:
            return fault
    return checker.close()


def _fault(schema: Any, text: str) -> Fault:
    whole, by_char = _run(schema, text), _run(schema, text, by_char=True)
    assert whole is not None and whole == by_char
    return whole


def _at(text: str, marker: str) -> int:
    """The offset of the character marked by ``marker`` (the first one in ``text``)."""
    return text.index(marker)


@pytest.mark.parametrize(
    ("schema", "text", "offset", "path"),
    [
        # a wrong type at the value's first character
        (WEATHER, '{"city": "Oslo", "days": "three"}', 25, "$.days"),
        (WEATHER, '{"city": 5, "days": 1}', 9, "$.city"),
        ({"type": "array", "items": {"type": "boolean"}}, "[true, false, null]", 14, "$[2]"),
        # an enum string at the first character that no value continues
        (WEATHER, '{"city": "x", "days": 1, "unit": "celx"}', 37, "$.unit"),
        (WEATHER, '{"city": "x", "days": 1, "unit": "celsiusx"}', 41, "$.unit"),
        (WEATHER, '{"city": "x", "days": 1, "unit": "celsiu"}', 40, "$.unit"),  # at its closing quote
        ({"const": "a\u00e9"}, '"a\\u00e8"', 2, "$"),  # an escape: at its backslash
        # additionalProperties: false at the first character that no property name continues
        (WEATHER, '{"city": "x", "cx": 1}', 16, "$"),
        (WEATHER, '{"city": "x", "da": 1}', 17, "$"),  # a prefix of "days", complete: at its closing quote
        ({"additionalProperties": {"type": "integer"}}, '{"a": 1, "b": "x"}', 14, "$.b"),
        # required, at the closing brace
        (WEATHER, '{"city": "x"}', 12, "$"),
        # integer versus number, and bounds: when the number ends
        (WEATHER, '{"city": "x", "days": 1.5}', 25, "$.days"),
        ({"type": "integer", "minimum": 2}, "1 ", 1, "$"),
        ({"type": "integer", "maximum": 2}, "3", 1, "$"),  # a top-level number ends at close
        ({"items": {"exclusiveMinimum": 2}}, "[2]", 2, "$[0]"),
        ({"items": {"exclusiveMaximum": 2}}, "[2.0]", 4, "$[0]"),
        # string lengths in code points: a surrogate-pair escape is one
        ({"maxLength": 2}, '"\\ud83d\\ude00ab"', 14, "$"),
        ({"minLength": 3}, '"\\ud83d\\ude00a"', 14, "$"),
        ({"maxLength": 1}, '"😀x"', 2, "$"),
        # item counts: maxItems at the extra item's first character, minItems at the closing bracket
        ({"maxItems": 2}, '[1, 2, {"a": 1}]', 7, "$[2]"),
        ({"minItems": 2}, "[1]", 2, "$"),
        ({"prefixItems": [{"type": "string"}], "items": False}, '["a", 1]', 6, "$[1]"),
        # combinators
        ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, "[]", 0, "$"),
        # two branches match: known at the value's end
        ({"items": {"oneOf": [{"type": "integer"}, {"type": "number"}]}}, "[1]", 2, "$[0]"),
        ({"allOf": [{"type": "string"}, {"maxLength": 1}]}, '"ab"', 2, "$"),
        # local $ref, recursion through it, and boolean schemas
        (
            {
                "$defs": {"n": {"type": "object", "properties": {"c": {"items": {"$ref": "#/$defs/n"}}}}},
                "$ref": "#/$defs/n",
            },
            '{"c": [{"c": []}, {"c": [7]}]}',
            25,
            "$.c[1].c[0]",
        ),
        ({"properties": {"a": False}}, '{"a": 1}', 6, "$.a"),
        (False, "1", 0, "$"),
    ],
)
def test_the_earliest_fault(schema: Any, text: str, offset: int, path: str) -> None:
    fault = _fault(schema, text)
    assert (fault.code, fault.offset, fault.path) == (SCHEMA, offset, path)
    assert fault.message.startswith(f"at {path}: ")
    control = text[:offset]  # what goes out before the fault still faults nowhere
    checker = JsonChecker(compile_schema(schema))
    assert checker.feed(control) is None


@pytest.mark.parametrize(
    ("schema", "text"),
    [
        (WEATHER, '{"city": "Oslo", "days": 3, "unit": "celsius"}'),
        ({"type": "integer"}, "[1.0]".strip("[]")),  # 1.0 and 1e2 are integers to JSON Schema
        ({"type": "integer"}, "1e2"),
        ({"enum": [1]}, "1.0"),
        ({"const": {"a": [1]}}, '{"a": [1]}'),
        ({"type": ["string", "null"]}, "null"),
        ({"type": "string", "nullable": True}, "null"),
        ({"minLength": 1, "maxLength": 1}, '"\\ud83d\\ude00"'),
        ({"pattern": "^x", "format": "email", "multipleOf": 7, "not": {}, "uniqueItems": True}, '"a"'),
        ({"oneOf": [{"type": "integer"}, {"type": "integer", "multipleOf": 2}]}, "3"),  # inexact: never "two"
        ({"items": [{"type": "string"}], "additionalItems": {"type": "integer"}}, '["a", 1]'),
        (
            {
                "properties": {"a": {"type": "integer"}},
                "patternProperties": {"^b": {}},
                "additionalProperties": False,
            },
            '{"b": 1}',
        ),  # additionalProperties unevaluated beside patterns
        (
            {
                "$schema": "http://json-schema.org/draft-07/schema#",
                "definitions": {"s": {"type": "string"}},
                "properties": {"a": {"$ref": "#/definitions/s", "type": "integer"}},
            },
            '{"a": "x"}',
        ),
    ],
)
def test_valid_documents_pass(schema: Any, text: str) -> None:
    assert _run(schema, text) is None and _run(schema, text, by_char=True) is None


@pytest.mark.parametrize("exponent", ["e", "E"])
def test_an_exponent_in_either_case_is_a_number_the_bounds_judge(exponent: str) -> None:
    """JSON allows ``E`` as well as ``e``: both are read as the number they are, for ``type``,
    ``minimum`` and ``maximum`` alike (the valid ones pass, the out-of-bounds ones fault where they end)."""
    bounded = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 50, "maximum": 500}}}

    def number(text: str) -> str:
        return text.replace("e", exponent)

    for text in ("1e2", "1.5e2", "5e+1", "2e-1"):
        assert _run({"type": "number", "minimum": 0}, number(text)) is None
    assert _run(bounded, '{"n": ' + number("1e2") + "}") is None
    assert _run(bounded, '{"n": ' + number("2.5e2") + "}") is None  # 250: integral, so an integer
    for text, message in (("1e1", "at least 50"), ("1e3", "at most 500"), ("1.5e-1", "integer")):
        document = '{"n": ' + number(text) + "}"
        fault = _fault(bounded, document)
        assert (fault.code, fault.path, fault.offset) == (SCHEMA, "$.n", len(document) - 1)
        assert message in fault.message


def test_the_message_says_where_and_why() -> None:
    fault = _fault(WEATHER, '{"city": "Oslo", "days": "three"}')
    assert fault == Fault(SCHEMA, 25, "$.days", "at $.days: expected integer, got a string")
    assert _fault(WEATHER, '{"city": "x", "cx": 1}').message.startswith('at $: property "cx…" is not allowed')
    assert _fault(WEATHER, '{"city": "x"}').message == 'at $: missing required property "days"'
    assert _fault({"properties": {"a b": {"items": {"type": "null"}}}}, '{"a b": [0]}').path == '$["a b"][0]'


@pytest.mark.parametrize(
    ("text", "offset"),
    [
        ("", 0),
        ("  ", 2),
        ('{"a": 1,}', 8),
        ("[1 2]", 3),
        ("01", 1),
        ('"\x01"', 1),
        ('"\\x"', 2),
        ("tru", 3),
        ("nul!", 3),
        ("{} x", 3),
        ("-", 1),
        ("1.", 2),
        ("1e+", 3),
        ("[", 1),
        ('{"a"}', 4),
        ("NaN", 0),
        ("\ufeff{}", 0),
    ],
)
def test_syntax_faults(text: str, offset: int) -> None:
    fault = _fault(None, text)
    assert (fault.code, fault.offset) == (SYNTAX, offset)
    assert fault.message.startswith("invalid JSON at $")


def test_sticky_done_and_after_close() -> None:
    checker = JsonChecker(compile_schema({"type": "object"}))
    assert checker.feed('{"a": [1, ') is None and not checker.done
    assert checker.feed("2]}") is None and checker.done
    fault = checker.feed(" x")
    assert fault is not None and fault.offset == 14
    assert checker.feed("{}") is fault and checker.close() is fault and checker.fault is fault
    number = JsonChecker()
    assert number.feed("12") is None and not number.done  # a number ends only with what follows it
    assert number.close() is None and number.done


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        (5, "not an object or boolean"),
        ({"properties": {"a": "string"}}, "not an object or boolean"),
        ({"$ref": "https://example.com/s.json"}, "not local"),
        ({"$ref": "#anchor"}, "not local"),
        ({"$ref": "#/$defs/missing"}, "does not resolve"),
        (
            {
                "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"anyOf": [{"$ref": "#/$defs/a"}]}},
                "$ref": "#/$defs/a",
            },
            "cycle",
        ),
        ({"$ref": "#"}, "cycle"),
        ({"type": "integr"}, "unknown type"),
        ({"items": {"$id": "https://example.com/x", "type": "string"}}, r"\$id"),
    ],
)
def test_schemas_it_cannot_read(schema: Any, words: str) -> None:
    with pytest.raises(SchemaError, match=words) as raised:
        compile_schema(schema)
    assert isinstance(raised.value, SSEMiddlewareError)


def test_a_cycle_that_consumes_input_is_fine() -> None:
    schema = {"type": "array", "items": {"$ref": "#"}}
    assert _run(schema, "[[], [[]]]") is None
    assert _fault(schema, "[[], [1]]").offset == 6
