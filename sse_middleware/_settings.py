"""Settings: one frozen dataclass, readable from ``SSE_MIDDLEWARE_*`` environment variables.

A bad value is an error at start-up that names the variable: a typo in a deploy must never turn a
feature silently off. Each field is checked by its type (:mod:`._settings_types`), a few also by a check
of their own (``_SPECIAL``). Per-route and per-request overrides go through :func:`override` /
:func:`opt_out`, which store a partial settings mapping in the ASGI scope (see README).
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib.util
import os
from collections.abc import Callable, Mapping, MutableMapping
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal, Protocol, TypedDict

from ._core.config import CoreConfig
from ._core.dialects.detect import DialectName
from ._core.recovery.anchor import PROMPT as RECOVER_PROMPT
from ._core.recovery.prefill import MODES as RECOVER_MODES
from ._core.resume import parse_store_url
from ._exceptions import ConfigError
from ._settings_types import AtLeast, Count, Seconds, kinds

if TYPE_CHECKING:
    from typing_extensions import Unpack  # in typing from 3.11; only the type checker reads it here

ENV_PREFIX: Final = "SSE_MIDDLEWARE_"

# The scope key under which per-request overrides live ("extensions" is namespaced by convention).
SCOPE_KEY: Final = "sse_middleware"


class Lookup(Protocol):
    """A source of variables that is not a mapping, such as Starlette's ``Config``: ``lookup(name,
    default=None)`` is the variable's text, or None when it is unset."""

    def __call__(self, key: str, *, default: None) -> str | None: ...


@dataclasses.dataclass(frozen=True, slots=True)
class StreamingSettings:
    """Everything the middleware can be told. Defaults are safe for a chat endpoint behind nginx."""

    heartbeat_interval: Seconds = 15.0
    """Seconds of silence before an SSE comment is sent; 0 disables (no timer at all)."""
    heartbeat_comment: str = "ping"
    coalesce: bool = True
    coalesce_max_delay: Seconds = 0.05
    coalesce_max_bytes: Count = 4096
    dialect: DialectName = "auto"
    json_text_field: str = "text"
    """With ``dialect="json"``: the field of each event's JSON object that holds its text (a dotted path
    such as ``delta.text`` reaches into nested objects)."""
    error_detail: bool = False
    """Whether raw exception messages may reach the client. Off: only a generic message and an id."""
    stall_timeout: Seconds = 0.0
    """Seconds of upstream silence that end the stream with a timeout error; 0 = off."""
    send_timeout: Seconds = 30.0
    """Seconds a write to the client may take; one that takes longer means the client stopped reading
    (asleep, out of coverage, a half-open connection): the stream ends as on a disconnect, or a
    resumable one detaches. 0 = off (then only TCP, often 15 minutes later, lets the app go)."""
    shutdown_grace: Seconds = 5.0
    """Seconds an open stream may take to end once the server shuts down."""
    shutdown_retry_ms: Count = 1000
    """``retry:`` sent to clients with the shutdown event: how soon they should reconnect."""
    telemetry: bool = True
    slo_ttft: Seconds = 0.0
    """Time-to-first-token objective in seconds; 0 = none. Spans say whether each stream met it."""
    slo_tpot: Seconds = 0.0
    """Time-per-output-token objective (p95 of a stream's gaps) in seconds; 0 = none."""
    inter_chunk_sample_every: Count = 32
    """Record every Nth inter-chunk gap in the per-gap histogram, from a random phase per stream, so its
    percentiles stay unbiased (1 = every gap). An OpenTelemetry SDK ``Histogram.record`` costs more than
    a whole token's trip through the middleware, so every gap would dominate the CPU per token (figures:
    docs/benchmarks.md). Span percentiles and TPOT always use every gap."""
    max_event_bytes: Count = 1 << 20
    """An event larger than this is never merged: it is forwarded as it arrives."""
    validate_json: bool = False
    """Hold each stream's JSON output against what its request declared (OpenAI ``tools`` and
    ``response_format``, Responses ``tools`` and ``text.format``, Anthropic ``input_schema``) and end it
    with an ``invalid_output`` error at the first character no valid document could have."""
    json_schema: Mapping[str, Any] | None = dataclasses.field(default=None, compare=False, hash=False)
    """Per request, with :func:`override`: a JSON Schema for the text content, for an app whose own
    request does not carry one (a JSON relay, an upstream request the app builds itself)."""
    guard_mode: Literal["hold", "observe"] = "hold"
    """With guards: ``hold`` sends no text before every guard passed it; ``observe`` lets text flow as
    without guards, checks beside it, and ends the stream at the first trip."""
    guard_timeout: Seconds = 5.0
    """Seconds an async guard may take for one check; past it, the check is a fault (``guard_failure``)."""
    guard_failure: Literal["block", "allow"] = "block"
    """A guard that raises anything but ``Blocked`` or times out: ``block`` ends the stream with the
    format's (sanitized) error event; ``allow`` logs it, counts it and lets the text go on."""

    mark_parent_span: bool = True
    """A stream that fails after its 200 also marks the span it is a child of (the HTTP server span of
    opentelemetry-instrumentation-asgi or FastAPIInstrumentor): status ERROR and ``error.type``, so the
    failure shows in the trace list. Off: only the stream's own span says so."""
    resume: bool = False
    """Give every SSE event an id naming the stream and keep a log of it, so a client that reconnects with
    ``Last-Event-ID`` gets the rest of the stream instead of a new request to the app."""
    resume_store: str = "memory://"
    """Where logs live: ``memory://`` (this process; ``?max_bytes=N`` bounds all its logs together) or
    ``redis://host:port/db`` (any number of hosts; needs redis-py, the ``[redis]`` extra)."""
    resume_ttl: Seconds = 300.0
    """Seconds a finished stream's log is kept for a resume."""
    resume_max_bytes: Annotated[int, AtLeast(1024)] = 4 << 20
    """Bound on one log: its newest events up to this many bytes, each counted with 64 bytes of overhead
    (which bounds the number of events too). A client further behind is not resumed."""
    resume_abandon_after: Seconds = 30.0
    """Seconds the app keeps producing into the log after its client left, while no one resumes."""
    resume_lease: Seconds = 6.0
    """Seconds a producer's lease on its stream lasts in a shared store (``redis://``) unless renewed; it
    renews it every third of that while it produces. A lease that ran out means its host died: the
    stream's resumes end with the format's error event, or take the stream over (``recover`` on)."""
    recover: Literal["off", "retry", "continue"] = "off"
    """A provider that fails mid-answer (the app raises, relays the provider's error event, stalls, or
    ends without the format's end marker): ``retry`` runs the app again while nothing of the answer
    has reached the client; ``continue`` also after text went out, splicing the re-run onto it. The
    client sees one stream. Off: nothing of recovery runs."""
    recover_attempts: Count = 2
    """Re-runs before giving up with the first failure's ending."""
    recover_start_timeout: Seconds = 30.0
    """Seconds a re-run may take to start its response (its upstream's answer to the request) before that
    attempt counts as failed; 0 = no bound. The stall timeout counts from the re-run's start, as it
    does from a first run's."""
    recover_backoff: Seconds = 0.25
    """Seconds before the first re-run, doubling before each next; the client gets heartbeats."""
    recover_body: Literal["same", "prefill", "anchor", "auto"] = "same"
    """What a re-run reads as its request body: ``same`` (replayed unchanged; the app reads
    ``recovery()``), ``prefill`` (for Anthropic messages and OpenAI chat bodies, the client's text
    appended as the final assistant turn the upstream continues), ``anchor`` (for upstreams without
    prefill: the text as an assistant turn and ``recover_prompt`` asking the model to go on, first
    repeating its last words) or ``auto`` (one of these by the body's ``model``: ``recover_models``)."""
    recover_prompt: str = RECOVER_PROMPT
    """``recover_body="anchor"``: the user turn asking for the continuation; ``{anchor}`` stands for the
    last words the model is asked to repeat."""
    recover_models: Mapping[str, str] | None = dataclasses.field(default=None, compare=False, hash=False)
    """``recover_body="auto"``: model-name patterns (``fnmatch``, case-insensitive) to ``same``,
    ``prefill`` or ``anchor``, read before the built-in table (docs/recovery.md)."""
    compress: Literal["off", "auto"] = "off"
    """``auto``: gzip a stream when its request accepts it, flushed after every frame so nothing waits
    (docs/compression.md: never for a response that mixes a secret with text an attacker chooses).
    Off: the wire stays the app's."""

    def __post_init__(self) -> None:
        for name, check in _CHECKS.items():
            check(getattr(self, name))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | Lookup | None = None) -> StreamingSettings:
        """Read ``SSE_MIDDLEWARE_<FIELD>`` variables; unset ones keep their defaults.

        ``environ``: ``os.environ`` when None; any mapping; or a lookup such as Starlette's
        ``Config(".env")``, whose file and environment are both searched for misspelt names.
        """
        source: Mapping[str, str] | Lookup = os.environ if environ is None else environ
        known = {ENV_PREFIX + name.upper(): name for name in _KINDS}
        unknown = sorted(
            name for name in _listed(source) if name.startswith(ENV_PREFIX) and name not in known
        )
        if unknown:
            raise ConfigError(f"unknown setting(s) {_nearest(unknown, ENV_PREFIX)}")
        values: dict[str, Any] = {}
        for variable, name in known.items():
            raw = source.get(variable) if isinstance(source, Mapping) else source(variable, default=None)
            if raw is None:
                continue
            try:
                values[name] = _KINDS[name].parse(raw.strip())
            except ValueError as exc:
                raise ConfigError(f"{variable}={raw!r} is not valid: {exc}") from None
            try:
                _CHECKS[name](values[name])
            except ConfigError as exc:
                raise ConfigError(f"from the environment: {exc} (in {variable}={raw!r})") from None
        return cls(**values)

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
        _known(changes)
        return dataclasses.replace(self, **changes)


class SettingsChanges(TypedDict, total=False):
    """What :func:`override` takes: any of the fields of :class:`StreamingSettings`, by name."""

    heartbeat_interval: Seconds
    heartbeat_comment: str
    coalesce: bool
    coalesce_max_delay: Seconds
    coalesce_max_bytes: Count
    dialect: DialectName
    json_text_field: str
    error_detail: bool
    stall_timeout: Seconds
    send_timeout: Seconds
    shutdown_grace: Seconds
    shutdown_retry_ms: Count
    telemetry: bool
    slo_ttft: Seconds
    slo_tpot: Seconds
    inter_chunk_sample_every: Count
    max_event_bytes: Count
    validate_json: bool
    json_schema: Mapping[str, Any] | None
    guard_mode: Literal["hold", "observe"]
    guard_timeout: Seconds
    guard_failure: Literal["block", "allow"]
    mark_parent_span: bool
    resume: bool
    resume_store: str
    resume_ttl: Seconds
    resume_max_bytes: Annotated[int, AtLeast(1024)]
    resume_abandon_after: Seconds
    resume_lease: Seconds
    recover: Literal["off", "retry", "continue"]
    recover_attempts: Count
    recover_start_timeout: Seconds
    recover_backoff: Seconds
    recover_body: Literal["same", "prefill", "anchor", "auto"]
    recover_prompt: str
    recover_models: Mapping[str, str] | None
    compress: Literal["off", "auto"]


def _listed(source: Mapping[str, str] | Lookup) -> list[str]:
    """The variable names a source can list. Starlette's ``Config`` is no mapping, but keeps what it reads
    in ``file_values`` and ``environ``, and looks each name up with its ``env_prefix`` before it."""
    if isinstance(source, Mapping):
        return list(source)
    prefix: str = getattr(source, "env_prefix", "")
    names = [*getattr(source, "file_values", {}), *getattr(source, "environ", {})]
    return [name[len(prefix) :] for name in names if name.startswith(prefix)]


def _known(changes: Mapping[str, object]) -> None:
    unknown = sorted(set(changes) - set(_KINDS))
    if unknown:
        raise ConfigError(f"unknown setting(s) {_nearest(unknown)}")


def _nearest(unknown: list[str], prefix: str = "") -> str:
    """Each unknown name with the known one it most likely misspells (compared after ``prefix``, which
    every name shares): one name to fix, not a list of all (docs/settings.md has that)."""
    told = []
    for name in unknown:
        close = difflib.get_close_matches(name[len(prefix) :].lower(), _KINDS, n=1)
        if close:
            name += f" (did you mean {prefix + close[0].upper() if prefix else close[0]}?)"
        told.append(name)
    return ", ".join(told)


def resolve(settings: StreamingSettings | None, changes: Mapping[str, object]) -> StreamingSettings:
    """The middleware's settings from what it was given: a ``StreamingSettings``, or fields as keywords
    (over the environment's ``SSE_MIDDLEWARE_*``, as ``settings=None`` reads it), never both."""
    if settings is None:
        return StreamingSettings.from_env().replace(changes)
    if changes:
        raise ConfigError(
            f"settings= and setting keywords ({', '.join(sorted(changes))}) given together: pass one,"
            " StreamingSettings(...) or the keywords"
        )
    if not isinstance(settings, StreamingSettings):
        raise TypeError(f"settings must be a StreamingSettings, got {type(settings).__name__}")
    return settings


def _json_path(value: str) -> None:
    """A JSON field name, or names joined by dots; no quotes, backslashes or control characters, which
    no field an app writes with ``json.dumps`` would hold unescaped."""
    if any(not part or any(c in '"\\' or ord(c) < 0x20 for c in part) for part in value.split(".")):
        raise ConfigError(
            f"json_text_field must name a JSON field, or a dotted path such as 'delta.text', got {value!r}"
        )


def _single_line(value: str) -> None:
    if any(c in value for c in "\r\n"):
        raise ConfigError(f"heartbeat_comment must be a single line of text, got {value!r}")


def _store(value: str) -> None:
    try:
        address = parse_store_url(value)
    except ValueError as exc:
        raise ConfigError(f"resume_store: {exc}") from None
    if address.kind == "redis" and importlib.util.find_spec("redis") is None:
        raise ConfigError(
            f"resume_store={value!r} needs the Redis client, redis-py: pip install redis (the [redis] extra)"
        )


def _positive_ttl(value: float) -> None:
    if value == 0:  # a log that expires as it is written resumes nothing
        raise ConfigError(f"resume_ttl must be > 0, got {value!r}")


def _anchor_prompt(value: str) -> None:
    if "{anchor}" not in value:  # without the words to repeat, the seam could not be found
        raise ConfigError(f"recover_prompt must contain {{anchor}} (the words to repeat), got {value!r}")


def _model_modes(value: Mapping[str, Any] | None) -> None:
    for pattern, mode in (value or {}).items():
        if not isinstance(pattern, str) or mode not in RECOVER_MODES:
            raise ConfigError(
                f"recover_models maps model patterns to one of {', '.join(RECOVER_MODES)}, got "
                f"{pattern!r}: {mode!r}"
            )


def _positive_lease(value: float) -> None:
    if value == 0:  # a lease that runs out as it is taken says every producer is dead
        raise ConfigError(f"resume_lease must be > 0, got {value!r}")


# The checks a field's type cannot express, each run after its type's check passed.
_SPECIAL: Final[Mapping[str, Callable[[Any], None]]] = {
    "json_text_field": _json_path,
    "heartbeat_comment": _single_line,
    "resume_store": _store,
    "resume_ttl": _positive_ttl,
    "recover_prompt": _anchor_prompt,
    "recover_models": _model_modes,
    "resume_lease": _positive_lease,
}
_KINDS: Final = kinds(StreamingSettings)
if not set(_SPECIAL) <= set(_KINDS):
    raise TypeError(f"special checks for no field: {sorted(set(_SPECIAL) - set(_KINDS))}")


def _field_check(name: str) -> Callable[[object], None]:
    by_type, special = _KINDS[name].check, _SPECIAL.get(name)

    def check(value: object) -> None:
        by_type(name, value)
        if special is not None:
            special(value)

    return check


_CHECKS: Final = {name: _field_check(name) for name in _KINDS}


def _per_request(changes: Mapping[str, object]) -> None:
    """Changes one request may make: known names with valid values, and not the store."""
    _known(changes)
    if "resume_store" in changes:  # a resume looks its log up before any app runs
        raise ConfigError("resume_store cannot be changed per request: resumes find their log before the app")
    for name, value in changes.items():
        _CHECKS[name](value)


def effective(settings: StreamingSettings, scope: Mapping[str, Any]) -> StreamingSettings | None:
    """The settings for one response: the middleware's, with the request's overrides; None if opted out."""
    overrides = scope.get(SCOPE_KEY)
    if not overrides:
        return settings
    changes = dict(overrides)
    if not changes.pop("enabled", True):
        return None
    _per_request(changes)
    return settings.replace(changes)


def override(scope: MutableMapping[str, Any], **changes: Unpack[SettingsChanges]) -> None:
    """Change settings for this one request (call from a route or dependency before responding).

    Checked here: an unknown name or a bad value is a :class:`ConfigError` from this call.
    """
    _per_request(changes)
    scope.setdefault(SCOPE_KEY, {}).update(changes)


def opt_out(scope: MutableMapping[str, Any]) -> None:
    """Leave this request's response exactly as the app sends it."""
    scope.setdefault(SCOPE_KEY, {})["enabled"] = False
