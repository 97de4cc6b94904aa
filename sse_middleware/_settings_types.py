"""How a setting is checked and read from text, decided by its type alone.

One validator per type (bool, int, float, str, ``Literal``, a mapping, any of them ``| None``), and a
lower bound written in the annotation (``Annotated[int, AtLeast(1)]``), so a new field of a known type is
one line in the dataclass and needs no code of its own. A field of a type with no validator here fails at
import, not silently unchecked.
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Final, Literal, Union, get_args, get_origin, get_type_hints

from ._exceptions import ConfigError

Check = Callable[[str, object], None]
"""``check(field, value)``: raises :class:`ConfigError` naming ``field`` if ``value`` is not valid."""
Parse = Callable[[str], object]
"""``parse(text)``: the value an environment variable's text means; raises ``ValueError`` if none."""


@dataclasses.dataclass(frozen=True, slots=True)
class AtLeast:
    """The lowest value a number setting takes, written in its annotation."""

    bound: int | float


Seconds = Annotated[float, AtLeast(0)]
"""A duration in seconds, finite; where a field says so, 0 turns its feature off."""
Count = Annotated[int, AtLeast(1)]
"""A number of things (bytes, milliseconds, gaps): an integer, at least 1."""


@dataclasses.dataclass(frozen=True, slots=True)
class Kind:
    """What a field's type says about its values: how to check one, how to read one from text."""

    check: Check
    parse: Parse


_TRUE: Final = frozenset(("1", "true", "yes", "on"))
_FALSE: Final = frozenset(("0", "false", "no", "off"))


def _parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError("expected one of 1/0, true/false, yes/no, on/off")


def _parse_text(text: str) -> str:
    return text


def _parse_number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError("expected a number") from None


def _parse_integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError("expected an integer") from None


def _parse_object(text: str) -> Mapping[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        raise ValueError("expected a JSON object") from None
    if not isinstance(value, dict):
        raise ValueError("expected a JSON object")
    return value


def _check_mapping(field: str, value: object) -> None:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{field} must be a mapping (a JSON object), got {value!r}")


def _or_none(inner: Kind) -> Kind:
    def check(field: str, value: object) -> None:
        if value is not None:
            inner.check(field, value)

    return Kind(check, inner.parse)


def _check_bool(field: str, value: object) -> None:
    if not isinstance(value, bool):
        raise ConfigError(f"{field} must be a bool, got {value!r}")


def _check_text(field: str, value: object) -> None:
    if not isinstance(value, str):
        raise ConfigError(f"{field} must be a string, got {value!r}")


def _integer(bound: int | float | None) -> Check:
    wanted = "an integer" if bound is None else f"an integer >= {bound}"

    def check(field: str, value: object) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or (bound is not None and value < bound):
            raise ConfigError(f"{field} must be {wanted}, got {value!r}")

    return check


def _number(bound: int | float | None) -> Check:
    wanted = "a finite number" if bound is None else f"a finite number >= {bound}"

    def check(field: str, value: object) -> None:
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or (bound is not None and value < bound)
        ):
            raise ConfigError(f"{field} must be {wanted}, got {value!r}")

    return check


def _one_of(choices: tuple[object, ...]) -> Check:
    listed = ", ".join(str(choice) for choice in choices)

    def check(field: str, value: object) -> None:
        if not isinstance(value, str) or value not in choices:
            raise ConfigError(f"{field} must be one of {listed}, got {value!r}")

    return check


def kind_of(annotation: object) -> Kind:
    """The checks a field's (resolved) annotation implies."""
    bound = None
    if get_origin(annotation) is Annotated:
        annotation, *extras = get_args(annotation)
        bound = next((extra.bound for extra in extras if isinstance(extra, AtLeast)), None)
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType) and type(None) in get_args(annotation):
        rest = [arg for arg in get_args(annotation) if arg is not type(None)]
        if len(rest) == 1:  # ``X | None``: None, or what X allows
            return _or_none(kind_of(rest[0]))
    if origin is Mapping:
        return Kind(_check_mapping, _parse_object)
    if origin is Literal:
        return Kind(_one_of(get_args(annotation)), _parse_text)
    if annotation is bool:
        return Kind(_check_bool, _parse_bool)
    if annotation is int:
        return Kind(_integer(bound), _parse_integer)
    if annotation is float:
        return Kind(_number(bound), _parse_number)
    if annotation is str:
        return Kind(_check_text, _parse_text)
    raise TypeError(f"no validator for a setting of type {annotation!r}: add one to {__name__}.kind_of")


def kinds(cls: type[Any]) -> Mapping[str, Kind]:
    """Each field of the dataclass ``cls`` by name, with the checks its type implies."""
    hints = get_type_hints(cls, include_extras=True)
    return {field.name: kind_of(hints[field.name]) for field in dataclasses.fields(cls)}
