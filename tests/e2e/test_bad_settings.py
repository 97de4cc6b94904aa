"""A bad setting stops ``uvicorn app:app`` at start-up, run as a user runs it (no ``--lifespan``: "auto",
where an exception in the lifespan reads as "unsupported" and the server starts anyway). The middleware
refuses the lifespan's startup with the message, and uvicorn exits with it. One run per kind of mistake;
the control, good settings, starts and serves from the app's own lifespan.
"""

from __future__ import annotations

import json
import os
import subprocess

import httpx
import pytest

from ..support.servers import ROOT, free_port, launch, uvicorn_command

APP = "tests.support.apps_settings:app"


@pytest.mark.parametrize(
    ("env", "options", "says"),
    [
        (
            {"SSE_MIDDLEWARE_HEARTBEAT_INTERVAL": "abc"},
            {},
            "SSE_MIDDLEWARE_HEARTBEAT_INTERVAL='abc' is not valid: expected a number",
        ),
        (
            {"SSE_MIDDLEWARE_HEARTBEAT_INTERVL": "5"},
            {},
            "unknown setting(s) SSE_MIDDLEWARE_HEARTBEAT_INTERVL"
            " (did you mean SSE_MIDDLEWARE_HEARTBEAT_INTERVAL?)",
        ),
        ({}, {"send_timeout": -1}, "send_timeout must be a finite number >= 0, got -1"),
        (
            {},
            {"heartbeat_intervl": 5},
            "unknown setting(s) heartbeat_intervl (did you mean heartbeat_interval?)",
        ),
    ],
    ids=["bad-value-env", "misspelt-env", "negative-keyword", "misspelt-keyword"],
)
def test_a_bad_setting_stops_uvicorn_at_start_up(
    env: dict[str, str], options: dict[str, object], says: str
) -> None:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SSE_MIDDLEWARE_")}
    environ |= {**env, "TEST_OPTIONS": json.dumps(options), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        uvicorn_command(APP, free_port()), cwd=ROOT, env=environ, capture_output=True, text=True, timeout=30
    )
    assert proc.returncode != 0, proc.stderr
    assert f"StreamingMiddleware: {says}" in proc.stderr
    assert "Application startup failed" in proc.stderr and "Application startup complete" not in proc.stderr


@pytest.mark.parametrize(
    "options",
    [{"heartbeat_interval": 5}, {"settings": {"heartbeat_interval": 5}}],
    ids=["keyword", "settings"],
)
def test_good_settings_start_and_serve_through_the_apps_lifespan(options: dict[str, object]) -> None:
    port = free_port()
    env = {"TEST_OPTIONS": json.dumps(options), "SSE_MIDDLEWARE_DIALECT": "openai"}
    with launch("uvicorn", uvicorn_command(APP, port), port, env) as server:
        assert httpx.get(server.url).text == "started by the app's lifespan"
        assert "Application startup complete" in server.output()
