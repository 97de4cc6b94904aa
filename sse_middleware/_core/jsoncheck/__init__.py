"""Structured output held against its JSON Schema while it streams: the first character that rules out
every valid completion is a fault. Sans-I/O: text in, ``Fault | None`` out."""

from .checker import SCHEMA, SYNTAX, Fault, JsonChecker
from .schema import EVALUATED, CompiledSchema, compile_schema

__all__ = ["EVALUATED", "SCHEMA", "SYNTAX", "CompiledSchema", "Fault", "JsonChecker", "compile_schema"]
