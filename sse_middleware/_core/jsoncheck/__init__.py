"""Structured output held against its JSON Schema while it streams: the first character that rules out
every valid completion is a fault. Sans-I/O: text in, ``Fault | None`` out."""

from .checker import JsonChecker
from .compiled import CompiledSchema
from .request import NO_CHECK, SYNTAX_ONLY, DeclaredSchemas, checker_for, declared_schemas
from .schema import EVALUATED, compile_schema
from .state import SCHEMA, SYNTAX, Fault

__all__ = [
    "EVALUATED",
    "NO_CHECK",
    "SCHEMA",
    "SYNTAX",
    "SYNTAX_ONLY",
    "CompiledSchema",
    "DeclaredSchemas",
    "Fault",
    "JsonChecker",
    "checker_for",
    "compile_schema",
    "declared_schemas",
]
