"""The routes of examples/relay.py without the middleware: the control of
tests/e2e/test_fault_catalogue.py (``examples.relay:app`` is the relay itself)."""

from __future__ import annotations

from fastapi import FastAPI

from examples.relay import app as relay

app = FastAPI(routes=relay.router.routes)
