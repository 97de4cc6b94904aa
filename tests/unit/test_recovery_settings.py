"""Recovery's settings (environment, checks, per request) and ``recovery()``, the app's view of a re-run."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

import sse_middleware
from sse_middleware import ConfigError, Recovery, StreamingSettings, override, recovery
from sse_middleware._core.recovery import SCOPE_KEY
from sse_middleware._settings import effective


def test_recovery_is_off_by_default() -> None:
    settings = StreamingSettings()
    assert (settings.recover, settings.recover_attempts, settings.recover_backoff) == ("off", 2, 0.25)
    assert settings.recover_body == "same"


def test_recovery_settings_from_the_environment() -> None:
    settings = StreamingSettings.from_env(
        {
            "SSE_MIDDLEWARE_RECOVER": "continue",
            "SSE_MIDDLEWARE_RECOVER_ATTEMPTS": "3",
            "SSE_MIDDLEWARE_RECOVER_BACKOFF": "0.5",
            "SSE_MIDDLEWARE_RECOVER_BODY": "prefill",
        }
    )
    assert (settings.recover, settings.recover_attempts, settings.recover_backoff) == ("continue", 3, 0.5)
    assert settings.recover_body == "prefill"


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("SSE_MIDDLEWARE_RECOVER", "always"),
        ("SSE_MIDDLEWARE_RECOVER_ATTEMPTS", "0"),
        ("SSE_MIDDLEWARE_RECOVER_BACKOFF", "-1"),
        ("SSE_MIDDLEWARE_RECOVER_BODY", "system-prompt"),
    ],
)
def test_a_bad_recovery_value_names_its_variable(variable: str, value: str) -> None:
    with pytest.raises(ConfigError, match=variable):
        StreamingSettings.from_env({variable: value})


def test_recovery_per_request() -> None:
    scope: dict[str, Any] = {"type": "http"}
    override(scope, recover="continue", recover_attempts=1)
    settings = effective(StreamingSettings(), scope)
    assert settings is not None and settings.recover == "continue" and settings.recover_attempts == 1
    off: dict[str, Any] = {"type": "http"}
    override(off, recover="off")  # the off switch wins over the middleware's own setting
    settings = effective(StreamingSettings(recover="continue"), off)
    assert settings is not None and settings.recover == "off"
    with pytest.raises(ConfigError):
        override(scope, recover="sometimes")  # type: ignore[typeddict-item]


def test_recovery_is_none_on_a_first_run_and_the_value_on_a_re_run() -> None:
    assert recovery({"type": "http"}) is None
    value = Recovery(1, "upstream_error", "Half an", "", "anthropic")
    scope = {"type": "http", SCOPE_KEY: value}
    assert recovery(scope) is value
    assert recovery(SimpleNamespace(scope=scope)) is value  # a Starlette request has .scope
    with pytest.raises(TypeError):
        recovery(42)


def test_the_public_names() -> None:
    assert {"Recovery", "recovery"} <= set(sse_middleware.__all__)
