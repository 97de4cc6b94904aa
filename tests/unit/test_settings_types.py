"""Settings checked by their types: each validator, the special checks, the dialect names, override()."""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Annotated, Literal

import pytest

from sse_middleware import ConfigError, StreamingSettings, override
from sse_middleware._core import headers
from sse_middleware._core.config import CoreConfig
from sse_middleware._core.dialects import BY_NAME, initial
from sse_middleware._core.dialects.detect import DialectName
from sse_middleware._settings import SCOPE_KEY, SettingsChanges, effective
from sse_middleware._settings_types import AtLeast, Seconds, kind_of, kinds

FIELDS = [field.name for field in dataclasses.fields(StreamingSettings)]


@pytest.mark.parametrize("name", FIELDS)
def test_every_field_refuses_a_value_of_another_type_naming_itself(name: str) -> None:
    default = getattr(StreamingSettings(), name)
    assert getattr(StreamingSettings(**{name: default}), name) == default  # the control: its own type
    with pytest.raises(ConfigError, match=f"^{name} must be"):
        StreamingSettings(**{name: object()})


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"coalesce": 1}, "coalesce must be a bool, got 1"),
        ({"telemetry": "yes"}, "telemetry must be a bool"),
        ({"coalesce_max_bytes": 0}, "coalesce_max_bytes must be an integer >= 1, got 0"),
        ({"coalesce_max_bytes": True}, "coalesce_max_bytes must be an integer >= 1, got True"),
        ({"coalesce_max_bytes": 2.0}, "coalesce_max_bytes must be an integer"),
        ({"resume_max_bytes": 1023}, "resume_max_bytes must be an integer >= 1024, got 1023"),
        ({"heartbeat_interval": -0.001}, "heartbeat_interval must be a finite number >= 0"),
        ({"stall_timeout": math.nan}, "stall_timeout must be a finite number >= 0, got nan"),
        ({"shutdown_grace": math.inf}, "shutdown_grace must be a finite number"),
        ({"slo_ttft": False}, "slo_ttft must be a finite number"),
        ({"slo_tpot": "1"}, "slo_tpot must be a finite number"),
        ({"heartbeat_comment": 3}, "heartbeat_comment must be a string, got 3"),
        ({"dialect": "gemini"}, "dialect must be one of auto, json, "),
        ({"dialect": 1}, "dialect must be one of"),
    ],
)
def test_each_validator_refuses_what_its_type_excludes(changes: dict[str, object], says: str) -> None:
    with pytest.raises(ConfigError, match=f"^{says}"):
        StreamingSettings(**changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "changes",
    [
        {"coalesce": False},
        {"coalesce_max_bytes": 1},
        {"resume_max_bytes": 1024},
        {"heartbeat_interval": 0},
        {"heartbeat_interval": 3},
        {"stall_timeout": 0.5},
        {"heartbeat_comment": ""},
        *({"dialect": name} for name in typing.get_args(DialectName)),
    ],
)
def test_each_validator_accepts_its_edge(changes: dict[str, object]) -> None:
    """The controls of the refusals above: the bound itself, an int for a float, every dialect name."""
    settings = StreamingSettings(**changes)  # type: ignore[arg-type]
    assert {name: getattr(settings, name) for name in changes} == changes


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"json_text_field": "a..b"}, "json_text_field must name a JSON field"),
        ({"heartbeat_comment": "a\rb"}, "heartbeat_comment must be a single line"),
        ({"resume_store": "memcached://x"}, "resume_store: expected memory:// or redis://"),
        ({"resume_ttl": 0}, "resume_ttl must be > 0, got 0"),
    ],
)
def test_the_special_checks_run_after_the_type_check(changes: dict[str, object], says: str) -> None:
    with pytest.raises(ConfigError, match=f"^{says}"):
        StreamingSettings(**changes)  # type: ignore[arg-type]
    name = next(iter(changes))
    with pytest.raises(ConfigError, match=f"^{name} must be a"):  # the type's message, not a crash
        StreamingSettings(**{name: None})


def test_a_new_field_is_checked_by_its_type_alone() -> None:
    """What adding a setting costs: one annotated line; its bound comes from the annotation."""

    @dataclasses.dataclass(frozen=True)
    class Probe:
        wait: Seconds = 1.0
        tries: Annotated[int, AtLeast(3)] = 3
        mode: Literal["hold", "observe"] = "hold"

    found = kinds(Probe)
    for name, good, bad in (("wait", 0.0, -1.0), ("tries", 3, 2), ("mode", "observe", "block")):
        found[name].check(name, good)
        with pytest.raises(ConfigError, match=f"^{name} must be"):
            found[name].check(name, bad)
    assert found["tries"].parse("4") == 4 and found["mode"].parse("observe") == "observe"


def test_a_mapping_or_none_field() -> None:
    """``json_schema: Mapping[str, Any] | None``: None or a mapping; from the environment, a JSON object."""
    assert StreamingSettings(json_schema=None).json_schema is None
    assert StreamingSettings(json_schema={"type": "object"}).json_schema == {"type": "object"}
    for bad in ([], "{}", 3):
        with pytest.raises(ConfigError, match=r"^json_schema must be a mapping \(a JSON object\)"):
            StreamingSettings(json_schema=bad)  # type: ignore[arg-type]
    read = StreamingSettings.from_env({"SSE_MIDDLEWARE_JSON_SCHEMA": '{"type": "string"}'})
    assert read.json_schema == {"type": "string"}
    for text in ("[1]", "{"):
        with pytest.raises(ConfigError, match="is not valid: expected a JSON object"):
            StreamingSettings.from_env({"SSE_MIDDLEWARE_JSON_SCHEMA": text})
    scope: dict[str, object] = {}
    with pytest.raises(ConfigError, match=r"^json_schema must be a mapping"):
        override(scope, json_schema=["not", "a", "schema"])  # type: ignore[arg-type]
    override(scope, json_schema={"type": "object"}, validate_json=True)  # the control
    assert scope[SCOPE_KEY] == {"json_schema": {"type": "object"}, "validate_json": True}


def test_a_type_without_a_validator_fails_at_import_not_silently() -> None:
    with pytest.raises(TypeError, match="no validator for a setting of type"):
        kind_of(list[str])
    assert kind_of(float).parse("1.5") == 1.5  # the control: a known type is fine


@pytest.mark.parametrize(
    ("word", "value"),
    [(w, True) for w in ("1", "true", "YES", "On")] + [(w, False) for w in ("0", "False", "no", "OFF")],
)
def test_from_env_reads_a_bool_from_its_words(word: str, value: bool) -> None:
    assert StreamingSettings.from_env({"SSE_MIDDLEWARE_TELEMETRY": f" {word} "}).telemetry is value


@pytest.mark.parametrize(
    ("variable", "raw", "says"),
    [
        ("SSE_MIDDLEWARE_SHUTDOWN_RETRY_MS", "1.5", "SSE_MIDDLEWARE_SHUTDOWN_RETRY_MS='1.5' is not valid: "
         "expected an integer"),
        ("SSE_MIDDLEWARE_SLO_TTFT", "1s", "SSE_MIDDLEWARE_SLO_TTFT='1s' is not valid: expected a number"),
        ("SSE_MIDDLEWARE_SLO_TTFT", "-1", "from the environment: slo_ttft must be a finite number >= 0, "
         "got -1.0 (in SSE_MIDDLEWARE_SLO_TTFT='-1')"),
        ("SSE_MIDDLEWARE_DIALECT", "OpenAI", "from the environment: dialect must be one of"),
        ("SSE_MIDDLEWARE_RESUME_TTL", "0", "resume_ttl must be > 0, got 0.0 "
         "(in SSE_MIDDLEWARE_RESUME_TTL='0')"),
    ],
)  # fmt: skip
def test_from_env_names_the_variable_and_the_field(variable: str, raw: str, says: str) -> None:
    with pytest.raises(ConfigError) as info:
        StreamingSettings.from_env({variable: raw})
    assert says in str(info.value)


def test_the_dialect_names_are_exactly_those_the_core_accepts() -> None:
    names = typing.get_args(DialectName)
    assert len(names) == len(set(names))
    assert set(names) == {"auto", "json", *BY_NAME}
    for name in names:  # every name the settings accept makes a dialect
        initial(headers.SSE, CoreConfig(dialect=name))
    with pytest.raises(KeyError):  # the control: one they refuse is not one the core knows
        initial(headers.SSE, CoreConfig(dialect="gemini"))  # type: ignore[arg-type]


def test_the_override_type_lists_every_field_with_its_type() -> None:
    """A new field cannot be forgotten in what override() is typed to take."""
    assert typing.get_type_hints(SettingsChanges, include_extras=True) == typing.get_type_hints(
        StreamingSettings, include_extras=True
    )
    assert not SettingsChanges.__required_keys__


def test_override_checks_at_the_call_and_leaves_the_scope_as_it_was() -> None:
    scope: dict[str, object] = {"type": "http"}
    with pytest.raises(ConfigError, match="unknown setting"):
        override(scope, heartbeat_intervl=3)  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match=r"^heartbeat_interval must be a finite number >= 0, got -1"):
        override(scope, heartbeat_interval=-1)
    with pytest.raises(ConfigError, match=r"^dialect must be one of"):
        override(scope, dialect="gemini")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"^json_text_field must name"):
        override(scope, json_text_field="a.")
    assert SCOPE_KEY not in scope  # nothing half-applied
    override(scope, heartbeat_interval=2, dialect="anthropic")  # the control: good changes are kept
    settings = effective(StreamingSettings(), scope)
    assert settings is not None and (settings.heartbeat_interval, settings.dialect) == (2, "anthropic")
