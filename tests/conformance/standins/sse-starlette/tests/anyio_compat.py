"""Stand-in, written for our conformance runner: sse-starlette's test suite imports this module, which its
sdist does not ship. It re-exports the helper the tests name, from the released package."""

from sse_starlette._utils import collapse_excgroups

__all__ = ["collapse_excgroups"]
