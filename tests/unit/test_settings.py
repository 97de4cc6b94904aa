"""Settings: environment parsing, clear errors, per-request overrides."""

from __future__ import annotations

import dataclasses

import pytest

from sse_middleware import ConfigError, StreamingSettings


def test_defaults_are_the_documented_ones() -> None:
    s = StreamingSettings()
    assert (s.heartbeat_interval, s.coalesce, s.coalesce_max_delay, s.coalesce_max_bytes) == (
        15.0,
        True,
        0.05,
        4096,
    )
    assert (s.dialect, s.error_detail, s.stall_timeout) == ("auto", False, 0.0)


def test_every_field_reads_from_its_variable() -> None:
    env = {
        "SSE_MIDDLEWARE_HEARTBEAT_INTERVAL": "10",
        "SSE_MIDDLEWARE_COALESCE": "off",
        "SSE_MIDDLEWARE_COALESCE_MAX_DELAY": "0.1",
        "SSE_MIDDLEWARE_COALESCE_MAX_BYTES": "2048",
        "SSE_MIDDLEWARE_DIALECT": "anthropic",
        "SSE_MIDDLEWARE_ERROR_DETAIL": "YES",
        "SSE_MIDDLEWARE_STALL_TIMEOUT": "30",
        "SSE_MIDDLEWARE_HEARTBEAT_COMMENT": "keepalive",
    }
    s = StreamingSettings.from_env(env)
    assert s == StreamingSettings(
        heartbeat_interval=10,
        coalesce=False,
        coalesce_max_delay=0.1,
        coalesce_max_bytes=2048,
        dialect="anthropic",
        error_detail=True,
        stall_timeout=30,
        heartbeat_comment="keepalive",
    )
    names = {f"SSE_MIDDLEWARE_{f.name.upper()}" for f in dataclasses.fields(StreamingSettings)}
    assert set(env) <= names


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        (
            "SSE_MIDDLEWARE_HEARTBEAT_INTERVAL",
            "soon",
            "SSE_MIDDLEWARE_HEARTBEAT_INTERVAL='soon' is not valid",
        ),
        ("SSE_MIDDLEWARE_HEARTBEAT_INTERVAL", "-1", "heartbeat_interval must be a finite number >= 0"),
        ("SSE_MIDDLEWARE_COALESCE", "maybe", "SSE_MIDDLEWARE_COALESCE='maybe' is not valid"),
        ("SSE_MIDDLEWARE_COALESCE_MAX_BYTES", "0", "coalesce_max_bytes must be an integer >= 1"),
        ("SSE_MIDDLEWARE_COALESCE_MAX_BYTES", "4k", "SSE_MIDDLEWARE_COALESCE_MAX_BYTES='4k'"),
        ("SSE_MIDDLEWARE_DIALECT", "gemini", "dialect must be one of"),
        ("SSE_MIDDLEWARE_STALL_TIMEOUT", "nan", "stall_timeout must be a finite number"),
        ("SSE_MIDDLEWARE_HEARTBEAT_INTERVL", "5", "unknown setting(s) SSE_MIDDLEWARE_HEARTBEAT_INTERVL"),
    ],
)
def test_a_bad_value_is_a_clear_error_never_a_silent_default(variable: str, value: str, says: str) -> None:
    with pytest.raises(ConfigError) as info:
        StreamingSettings.from_env({variable: value})
    assert says in str(info.value)


def test_settings_are_frozen_and_replace_validates() -> None:
    s = StreamingSettings()
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.coalesce = False  # type: ignore[misc]
    assert s.replace({"stall_timeout": 3}).stall_timeout == 3
    with pytest.raises(ConfigError, match="unknown setting"):
        s.replace({"stall": 3})
    with pytest.raises(ConfigError, match="must be"):
        s.replace({"coalesce_max_delay": -1})
    with pytest.raises(ConfigError, match="single line"):
        StreamingSettings(heartbeat_comment="a\nb")
