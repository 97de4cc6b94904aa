"""Settings: one frozen dataclass, readable from ``SSE_MIDDLEWARE_*`` environment variables.

A bad value is an error at start-up that names the variable: a typo in a deploy must never turn a
feature silently off. Per-route and per-request overrides go through :func:`override` /
:func:`opt_out`, which store a partial settings mapping in the ASGI scope (see README).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import os
from collections.abc import Mapping, MutableMapping
from typing import Any, Final

from ._core.config import CoreConfig
from ._core.resume import parse_store_url
from ._exceptions import ConfigError

DIALECTS: Final = ("auto", "openai", "openai-responses", "anthropic", "sse", "text", "ai-sdk", "json")
ENV_PREFIX: Final = "SSE_MIDDLEWARE_"

# The scope key under which per-request overrides live ("extensions" is namespaced by convention).
SCOPE_KEY: Final = "sse_middleware"


@dataclasses.dataclass(frozen=True, slots=True)
class StreamingSettings:
    """Everything the middleware can be told. Defaults are safe for a chat endpoint behind nginx."""

    heartbeat_interval: float = 15.0
    """Seconds of silence before an SSE comment is sent; 0 disables (no timer at all)."""
    heartbeat_comment: str = "ping"
    coalesce: bool = True
    coalesce_max_delay: float = 0.05
    coalesce_max_bytes: int = 4096
    dialect: str = "auto"
    json_text_field: str = "text"
    """With ``dialect="json"``: the field of each event's JSON object that holds its text (a dotted path
    such as ``delta.text`` reaches into nested objects)."""
    error_detail: bool = False
    """Whether raw exception messages may reach the client. Off: only a generic message and an id."""
    stall_timeout: float = 0.0
    """Seconds of upstream silence that end the stream with a timeout error; 0 = off."""
    send_timeout: float = 30.0
    """Seconds a write to the client may take; one that takes longer means the client stopped reading
    (asleep, out of coverage, a half-open connection): the stream ends as on a disconnect, or a
    resumable one detaches. 0 = off (then only TCP, often 15 minutes later, lets the app go)."""
    shutdown_grace: float = 5.0
    """Seconds an open stream may take to end once the server shuts down."""
    shutdown_retry_ms: int = 1000
    """``retry:`` sent to clients with the shutdown event: how soon they should reconnect."""
    telemetry: bool = True
    slo_ttft: float = 0.0
    """Time-to-first-token objective in seconds; 0 = none. Spans say whether each stream met it."""
    slo_tpot: float = 0.0
    """Time-per-output-token objective (p95 of a stream's gaps) in seconds; 0 = none."""
    inter_chunk_sample_every: int = 32
    """Record every Nth inter-chunk gap in the per-gap histogram, from a random phase per stream, so its
    percentiles stay unbiased (1 = every gap). An OpenTelemetry SDK ``Histogram.record`` costs more than
    a whole token's trip through the middleware, so every gap would dominate the CPU per token (figures:
    docs/benchmarks.md). Span percentiles and TPOT always use every gap."""
    max_event_bytes: int = 1 << 20
    """An event larger than this is never merged: it is forwarded as it arrives."""

    # -- telemetry (issue 15) --------------------------------------------------------------------------
    mark_parent_span: bool = True
    """A stream that fails after its 200 also marks the span it is a child of (the HTTP server span of
    opentelemetry-instrumentation-asgi or FastAPIInstrumentor): status ERROR and ``error.type``, so the
    failure shows in the trace list. Off: only the stream's own span says so."""
    # -- resumable streams (issue 16) ----------------------------------------------------------------
    resume: bool = False
    """Give every SSE event an id naming the stream and keep a log of it, so a client that reconnects with
    ``Last-Event-ID`` gets the rest of the stream instead of a new request to the app."""
    resume_store: str = "memory://"
    """Where logs live: ``memory://`` (this process; ``?max_bytes=N`` bounds all its logs together) or
    ``redis://host:port/db`` (any number of hosts; ``pip install "sse_middleware[redis]"``)."""
    resume_ttl: float = 300.0
    """Seconds a finished stream's log is kept for a resume."""
    resume_max_bytes: int = 4 << 20
    """Bound on one log: its newest events up to this many bytes, each counted with 64 bytes of overhead
    (which bounds the number of events too). A client further behind is not resumed."""
    resume_abandon_after: float = 30.0
    """Seconds the app keeps producing into the log after its client left, while no one resumes."""

    def __post_init__(self) -> None:
        _check(self)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> StreamingSettings:
        """Read ``SSE_MIDDLEWARE_<FIELD>`` variables; unset ones keep their defaults."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            name = ENV_PREFIX + field.name.upper()
            raw = env.get(name)
            if raw is not None:
                values[field.name] = _parse(name, raw, field.default)
        known = {ENV_PREFIX + f.name.upper() for f in dataclasses.fields(cls)}
        unknown = sorted(k for k in env if k.startswith(ENV_PREFIX) and k not in known)
        if unknown:
            raise ConfigError(f"unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        try:
            return cls(**values)
        except ConfigError as exc:
            raise ConfigError(f"from the environment: {exc}") from None

    def core(self) -> CoreConfig:
        """The plain values the sans-I/O core is told (it never sees this class)."""
        return CoreConfig(
            dialect=self.dialect,
            json_text_field=self.json_text_field,
            coalesce=self.coalesce,
            coalesce_max_delay=self.coalesce_max_delay,
            coalesce_max_bytes=self.coalesce_max_bytes,
            max_event_bytes=self.max_event_bytes,
            heartbeat_interval=self.heartbeat_interval,
            stall_timeout=self.stall_timeout,
        )

    def replace(self, changes: Mapping[str, Any]) -> StreamingSettings:
        """A copy with ``changes`` applied; unknown names are a :class:`ConfigError`."""
        names = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise ConfigError(f"unknown setting(s) {', '.join(unknown)}")
        return dataclasses.replace(self, **changes)


def _parse(name: str, raw: str, default: object) -> object:
    text = raw.strip()
    try:
        if isinstance(default, bool):
            lowered = text.lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off"):
                return False
            raise ValueError("expected one of 1/0, true/false, yes/no, on/off")
        if isinstance(default, int):
            return int(text)
        if isinstance(default, float):
            return float(text)
    except ValueError as exc:
        raise ConfigError(f"{name}={raw!r} is not valid: {exc}") from None
    return text


def _check(s: StreamingSettings) -> None:
    def non_negative(field: str) -> None:
        value = getattr(s, field)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{field} must be a number, got {value!r}")
        if not math.isfinite(value) or value < 0:
            raise ConfigError(f"{field} must be a finite number >= 0, got {value!r}")

    for field in (
        "heartbeat_interval",
        "coalesce_max_delay",
        "stall_timeout",
        "shutdown_grace",
        "slo_ttft",
        "slo_tpot",
    ):
        non_negative(field)
    for field in ("coalesce_max_bytes", "shutdown_retry_ms", "max_event_bytes", "inter_chunk_sample_every"):
        value = getattr(s, field)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{field} must be an integer >= 1, got {value!r}")
    for field in ("coalesce", "error_detail", "telemetry"):
        if not isinstance(getattr(s, field), bool):
            raise ConfigError(f"{field} must be a bool, got {getattr(s, field)!r}")
    if s.dialect not in DIALECTS:
        raise ConfigError(f"dialect must be one of {', '.join(DIALECTS)}, got {s.dialect!r}")
    _check_json_text_field(s.json_text_field)
    if not isinstance(s.heartbeat_comment, str) or any(c in s.heartbeat_comment for c in "\r\n"):
        raise ConfigError("heartbeat_comment must be a single line of text")
    _check_telemetry(s)
    _check_resume(s)


def _check_telemetry(s: StreamingSettings) -> None:
    if not isinstance(s.mark_parent_span, bool):
        raise ConfigError(f"mark_parent_span must be a bool, got {s.mark_parent_span!r}")


# -- dialects (issue 13) ---------------------------------------------------------------------------------
def _check_json_text_field(value: object) -> None:
    """A JSON field name, or names joined by dots; no quotes, backslashes or control characters, which
    no field an app writes with ``json.dumps`` would hold unescaped."""
    parts = value.split(".") if isinstance(value, str) else [""]
    if any(not part or any(c in '"\\' or ord(c) < 0x20 for c in part) for part in parts):
        raise ConfigError(
            f"json_text_field must name a JSON field, or a dotted path such as 'delta.text', got {value!r}"
        )


def effective(settings: StreamingSettings, scope: Mapping[str, Any]) -> StreamingSettings | None:
    """The settings for one response: the middleware's, with the request's overrides; None if opted out."""
    overrides = scope.get(SCOPE_KEY)
    if not overrides:
        return settings
    changes = dict(overrides)
    if not changes.pop("enabled", True):
        return None
    if "resume_store" in changes:  # (resumable streams) a resume looks its log up before any app runs
        raise ConfigError("resume_store cannot be changed per request: resumes find their log before the app")
    return settings.replace(changes)


def override(scope: MutableMapping[str, Any], **changes: Any) -> None:
    """Change settings for this one request (call from a route or dependency before responding).

    Changes are validated when the response starts, against the middleware's settings.
    """
    store = scope.setdefault(SCOPE_KEY, {})
    store.update(changes)


def opt_out(scope: MutableMapping[str, Any]) -> None:
    """Leave this request's response exactly as the app sends it."""
    scope.setdefault(SCOPE_KEY, {})["enabled"] = False


# -- resumable streams (issue 16) -------------------------------------------------------------------------


def _check_resume(s: StreamingSettings) -> None:
    if not isinstance(s.resume, bool):
        raise ConfigError(f"resume must be a bool, got {s.resume!r}")
    try:
        address = parse_store_url(s.resume_store)
    except ValueError as exc:
        raise ConfigError(f"resume_store: {exc}") from None
    if address.kind == "redis" and importlib.util.find_spec("redis") is None:
        raise ConfigError(
            f"resume_store={s.resume_store!r} needs the Redis client: pip install 'sse_middleware[redis]'"
        )
    for field in ("resume_ttl", "resume_abandon_after"):
        value = getattr(s, field)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ConfigError(f"{field} must be a finite number, got {value!r}")
        if value < 0 or (field == "resume_ttl" and value == 0):
            raise ConfigError(f"{field} must be {'> 0' if field == 'resume_ttl' else '>= 0'}, got {value!r}")
    size = s.resume_max_bytes
    if isinstance(size, bool) or not isinstance(size, int) or size < 1024:
        raise ConfigError(f"resume_max_bytes must be an integer >= 1024, got {size!r}")
