"""Settings of resumable streams: their variables, clear errors, per-request overrides."""

from __future__ import annotations

import sys

import pytest

from sse_middleware import ConfigError, StreamingSettings, override
from sse_middleware._settings import effective

ENV = {
    "SSE_MIDDLEWARE_RESUME": "on",
    "SSE_MIDDLEWARE_RESUME_STORE": "redis://127.0.0.1:6390/3",
    "SSE_MIDDLEWARE_RESUME_TTL": "60",
    "SSE_MIDDLEWARE_RESUME_MAX_BYTES": "65536",
    "SSE_MIDDLEWARE_RESUME_ABANDON_AFTER": "5",
}


def test_defaults_and_variables() -> None:
    s = StreamingSettings()
    assert (s.resume, s.resume_store, s.resume_ttl, s.resume_max_bytes, s.resume_abandon_after) == (
        False, "memory://", 300.0, 4 << 20, 30.0,
    )  # fmt: skip
    assert StreamingSettings.from_env(ENV) == StreamingSettings(
        resume=True,
        resume_store="redis://127.0.0.1:6390/3",
        resume_ttl=60,
        resume_max_bytes=65536,
        resume_abandon_after=5,
    )


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("SSE_MIDDLEWARE_RESUME", "maybe", "SSE_MIDDLEWARE_RESUME='maybe' is not valid"),
        ("SSE_MIDDLEWARE_RESUME_STORE", "memcached://x", "resume_store: expected memory:// or redis://"),
        ("SSE_MIDDLEWARE_RESUME_STORE", "redis://h:port/0", "resume_store: bad port"),
        ("SSE_MIDDLEWARE_RESUME_STORE", "redis://h/db", "the database number"),
        ("SSE_MIDDLEWARE_RESUME_STORE", "memory://?max_bytes=lots", "max_bytes must be an integer"),
        ("SSE_MIDDLEWARE_RESUME_TTL", "0", "resume_ttl must be > 0"),
        ("SSE_MIDDLEWARE_RESUME_TTL", "inf", "resume_ttl must be a finite number"),
        ("SSE_MIDDLEWARE_RESUME_MAX_BYTES", "100", "resume_max_bytes must be an integer >= 1024"),
        ("SSE_MIDDLEWARE_RESUME_ABANDON_AFTER", "-1", "resume_abandon_after must be a finite number >= 0"),
    ],
)
def test_a_bad_value_is_a_clear_error(variable: str, value: str, says: str) -> None:
    with pytest.raises(ConfigError) as info:
        StreamingSettings.from_env({variable: value})
    assert says in str(info.value)


def test_redis_without_the_extra_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    assert StreamingSettings(resume_store="redis://127.0.0.1:6379/0")  # control: redis-py installed
    monkeypatch.setitem(sys.modules, "redis", None)  # what Python does for a package that is not there
    with pytest.raises(ConfigError, match=r"needs the Redis client, redis-py: pip install redis"):
        StreamingSettings(resume_store="redis://127.0.0.1:6379/0")
    assert StreamingSettings(resume_store="memory://")  # memory needs nothing


def test_per_request_overrides() -> None:
    base = StreamingSettings()
    scope: dict[str, object] = {"type": "http"}
    override(scope, resume=True, resume_ttl=5)
    s = effective(base, scope)
    assert s is not None and (s.resume, s.resume_ttl) == (True, 5)
    # The store cannot change per request: a resume looks its log up before any app code runs. Refused
    # at the call, and from a scope written some other way at the response start.
    with pytest.raises(ConfigError, match="resume_store cannot be changed per request"):
        override(scope, resume_store="redis://127.0.0.1:6379/0")
    scope["sse_middleware"] = {"resume_store": "redis://127.0.0.1:6379/0"}
    with pytest.raises(ConfigError, match="resume_store cannot be changed per request"):
        effective(base, scope)
