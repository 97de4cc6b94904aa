"""The package's version, in one place: the build reads it (pyproject's ``dynamic = ["version"]``) and
``sse_middleware.__version__`` reports it. CHANGELOG.md's newest release says the same (a test checks)."""

__version__ = "0.4.0"
