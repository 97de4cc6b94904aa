"""The structured-output checker alone: ``python bench/json_check.py [--json]``.

µs of CPU per KB of checked text for two documents, each syntax only (``json_object``) and against its
schema: a realistic tool call's arguments (a flat object with a few strings, numbers, an enum and a short
array) and a nested structured output (an array of objects with nested arrays, escapes and non-ASCII).
The text is fed in token-sized pieces (4 characters), as the stream delivers it. For scale: the
standard library's ``json.loads`` of the whole text once, which a checker that re-parsed each prefix would
pay per token. CPU time (``process_time``), the minimum of interleaved rounds.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if sys.path and Path(sys.path[0]).resolve() == ROOT / "bench":
    sys.path.pop(0)
sys.path.insert(0, str(ROOT))

from sse_middleware._core.jsoncheck import CompiledSchema, JsonChecker, compile_schema  # noqa: E402

TOOL_SCHEMA = {
    "type": "object",
    "properties": {
        "location": {"type": "string", "minLength": 1},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "include": {"type": "array", "items": {"enum": ["wind", "rain", "uv", "pollen"]}, "maxItems": 4},
        "note": {"type": ["string", "null"], "maxLength": 500},
    },
    "required": ["location", "days"],
    "additionalProperties": False,
}
TOOL_ARGUMENTS = {"location": "San Francisco, CA", "days": 5, "unit": "celsius",
                  "include": ["wind", "rain", "uv"],
                  "note": "Planning a weekend hike around Mount Tamalpais; morning fog matters most."}

OUTPUT_SCHEMA = {
    "$defs": {
        "step": {"type": "object",
                 "properties": {"title": {"type": "string"}, "detail": {"type": "string"},
                                "minutes": {"type": "number", "minimum": 0},
                                "tags": {"type": "array", "items": {"type": "string"}}},
                 "required": ["title", "minutes"], "additionalProperties": False},
    },
    "type": "object",
    "properties": {
        "summary": {"type": "string"},
        "steps": {"type": "array", "items": {"$ref": "#/$defs/step"}, "minItems": 1},
        "confidence": {"anyOf": [{"type": "number", "minimum": 0, "maximum": 1}, {"type": "null"}]},
    },
    "required": ["summary", "steps"],
    "additionalProperties": False,
}
OUTPUT = {
    "summary": "A plan in three parts \u2014 with \"quotes\", a tab\tand \u00e9t\u00e9 \U0001f600 text.",
    "steps": [{"title": f"Step {i}: prepare the \u201cdata\u201d",
               "detail": "Line one\nline two \\ done. " * 3, "minutes": 2.5 * i,
               "tags": ["setup", "caf\u00e9", f"t{i}"]} for i in range(12)],
    "confidence": 0.82,
}
PIECE = 4  # characters per fed piece: about one token
ROUNDS = 7


def _pieces(text: str) -> list[str]:
    return [text[i:i + PIECE] for i in range(0, len(text), PIECE)]


def _check(pieces: list[str], schema: CompiledSchema | None) -> Callable[[], None]:
    def run() -> None:
        checker = JsonChecker(schema)
        for piece in pieces:
            if checker.feed(piece) is not None:
                raise AssertionError("the benchmark document faulted")
        if checker.close() is not None:
            raise AssertionError("the benchmark document faulted at its end")
    return run


def _discard(_: object) -> None:
    pass


def _cpu_us(function: Callable[[], None], repeat: int) -> float:
    start = time.process_time()
    for _ in range(repeat):
        function()
    return (time.process_time() - start) / repeat * 1e6


def main() -> None:
    rows: list[dict[str, object]] = []
    for name, document, schema in (("tool arguments", TOOL_ARGUMENTS, TOOL_SCHEMA),
                                   ("nested output", OUTPUT, OUTPUT_SCHEMA)):
        text = json.dumps(document, ensure_ascii=False)
        pieces = _pieces(text)
        compiled = compile_schema(schema)
        cases = {"syntax only": _check(pieces, None), "with schema": _check(pieces, compiled),
                 "json.loads once (scale)": lambda text=text: _discard(json.loads(text))}
        repeat = max(1, 200_000 // len(text))
        best = {label: min(_cpu_us(fn, repeat) for _ in range(ROUNDS)) for label, fn in cases.items()}
        kb = len(text.encode()) / 1000
        for label, micros in best.items():
            rows.append({"document": name, "bytes": len(text.encode()), "case": label,
                         "us_per_kb": round(micros / kb, 1), "us_per_document": round(micros, 1)})
    if "--json" in sys.argv[1:]:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'document':<16} {'bytes':>6}  {'case':<24} {'µs/KB':>8} {'µs/doc':>8}")
    for row in rows:
        print(f"{row['document']:<16} {row['bytes']:>6}  {row['case']:<24} {row['us_per_kb']:>8} "
              f"{row['us_per_document']:>8}")


if __name__ == "__main__":
    main()
