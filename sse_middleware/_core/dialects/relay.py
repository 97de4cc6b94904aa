"""JSON relays: an app's own envelope around one string of text per event, e.g. ``data: {"text": "…"}``.

Named with ``dialect="json"`` and ``json_text_field`` (a field, or a dotted path such as ``delta.text``),
such a stream merges from its first event. Unnamed, it is recognized only once a whole stream proved it,
so that an app's ordinary JSON messages are never merged on a guess: the route is remembered, and its
next streams merge from their first event (see :class:`RelayMemory`).

Either way only consecutive events that are byte-identical but for the text merge (the merge key is the
envelope itself), so a merged event keeps the app's envelope and key order and loses nothing but the
event boundaries.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, Final

from ..wire import (
    BACKSLASH,
    QUOTE,
    Delta,
    Envelope,
    is_done,
    loads,
    name_and_data,
    splice,
    string_field,
)
from .base import Dialect, First, Generic, Spliced

CANDIDATES: Final = ("text", "content", "token", "delta", "chunk")
"""The fields an unnamed relay may carry its text in."""
MIN_EVENTS: Final = 2
"""Text events a stream needs, before its ``[DONE]``, to prove its route a relay."""
_ROUTES: Final = 256


def route_key(scope: Mapping[str, Any]) -> Hashable:
    """What identifies a route across requests: the endpoint the router picked (Starlette and FastAPI
    put it in the scope), else the path; with the method."""
    endpoint = scope.get("endpoint")
    try:
        hash(endpoint)
    except TypeError:
        endpoint = None
    where = endpoint if endpoint is not None else scope.get("root_path", "") + scope.get("path", "")
    return scope.get("method"), where


class RelayMemory:
    """Routes whose last stream proved to be a JSON relay, with the field that carries the text.

    One per middleware, bounded (least recently proven first out). A stream proves its route when every
    event with data, until ``data: [DONE]``, was the same JSON envelope around a different string in one
    of :data:`CANDIDATES`, at least :data:`MIN_EVENTS` times. A later stream on that route that breaks the
    pattern stops merging there and makes the route forgotten.
    """

    def __init__(self, size: int = _ROUTES) -> None:
        self._size = size
        self._fields: dict[Hashable, str] = {}

    def for_route(self, scope: Mapping[str, Any]) -> RouteRelay:
        return RouteRelay(self, route_key(scope))

    def recall(self, key: Hashable) -> str | None:
        return self._fields.get(key)

    def learn(self, key: Hashable, field: str) -> None:
        self._fields.pop(key, None)
        self._fields[key] = field
        if len(self._fields) > self._size:
            del self._fields[next(iter(self._fields))]

    def forget(self, key: Hashable) -> None:
        self._fields.pop(key, None)


class RouteRelay:
    """One route's entry in a :class:`RelayMemory`, handed to one stream's pipeline."""

    __slots__ = ("_key", "_memory")

    def __init__(self, memory: RelayMemory, key: Hashable) -> None:
        self._memory, self._key = memory, key

    @property
    def field(self) -> str | None:
        return self._memory.recall(self._key)

    def learn(self, field: str) -> None:
        self._memory.learn(self._key, field)

    def forget(self) -> None:
        self._memory.forget(self._key)


def _string_body(contents: bytes) -> bool:
    """Whether ``contents`` are a JSON string's contents (what lies between its quotes)."""
    if QUOTE not in contents and BACKSLASH not in contents:
        return True
    return isinstance(loads(b'"' + contents + b'"'), str)


class JsonRelay(Spliced):
    """A relay whose text field is known: named by the settings, or learned for this route."""

    name = "json"
    rank = 1  # a guess a whole stream must prove: asked after every format that proves itself
    recovery = None
    """A relay's events name their text field, not an id, an end or an error: no re-run can be spliced
    onto what its client has."""

    @classmethod
    def detect(cls, first: First) -> Dialect | None:
        """Unnamed JSON on a route that may be a relay: merged when the route proved it, else watched
        (see :func:`first_event`); any other unnamed event makes the route forgotten."""
        route = first.route
        if first.name is not None or not isinstance(route, RouteRelay):
            return None
        obj = first.obj
        if isinstance(obj, dict):
            return first_event(first.raw, obj, route)
        route.forget()
        return None

    @classmethod
    def named(cls, json_text_field: str) -> Dialect:
        return cls(json_text_field)

    def __init__(self, field: str, route: RouteRelay | None = None) -> None:
        super().__init__()
        self._path = field.split(".")
        self._pattern = string_field(self._path[-1].encode())
        self._route = route  # set when the field was learned: a stream that breaks the pattern unlearns it
        self._on = True

    def delta(self, raw: bytes) -> Delta | None:
        if not self._on:
            return None
        found = super().delta(raw)
        if found is None and self._route is not None and not is_done(raw) and name_and_data(raw)[1]:
            self._route.forget()  # not the relay it was: stop merging, and prove it again next time
            self._on = False
        return found

    def part_key(self, key: Hashable) -> Hashable:
        return None  # one text, whatever envelope each event wraps it in

    def texts(self, raw: bytes) -> list[tuple[Hashable, str]]:
        value: Any = self.event_json(raw)
        for name in self._path:
            value = value.get(name) if isinstance(value, dict) else None
        return [(None, value)] if isinstance(value, str) and value else []

    def read(self, raw: bytes) -> Delta | None:
        value: Any = self.data_object(raw)
        for name in self._path:
            value = value.get(name) if isinstance(value, dict) else None
        envelope = splice(self._pattern, raw) if isinstance(value, str) else None
        if envelope is None or not isinstance(value, str):
            return None
        return Delta(envelope, envelope, value)


class RelayProbe(Generic):
    """Generic SSE whose first event looked like a relay: forwarded unchanged, watched to the end; a
    stream that keeps the pattern up to its ``[DONE]`` proves the route (see :class:`RelayMemory`)."""

    merges = True  # watches every event; merges none

    def __init__(self, field: str, route: RouteRelay, envelope: Envelope) -> None:
        super().__init__()
        self._field, self._route, self._envelope = field, route, envelope
        self._seen = 0
        self._on = True

    def delta(self, raw: bytes) -> Delta | None:
        if self._on:
            self._watch(raw)
        return None

    def _watch(self, raw: bytes) -> None:
        before, after = self._envelope
        end = len(raw) - len(after)
        fits = raw.startswith(before) and raw.endswith(after) and end >= len(before)
        if fits and _string_body(raw[len(before) : end]):
            self._seen += 1
            return
        if is_done(raw):
            if self._seen >= MIN_EVENTS:
                self._route.learn(self._field)
        elif not name_and_data(raw)[1]:
            return  # a comment, a retry: not part of the pattern either way
        self._on = False


def first_event(raw: bytes, obj: dict[str, Any], route: RouteRelay) -> Dialect | None:
    """The relay reader for a stream whose first event is ``raw`` (holding ``obj``), if it may be one."""
    fields = [name for name in CANDIDATES if isinstance(obj.get(name), str)]
    field = fields[0] if len(fields) == 1 else None
    if field is not None and route.field == field:
        return JsonRelay(field, route)
    route.forget()  # whatever this route streamed before, this stream has to prove itself again
    envelope = splice(string_field(field.encode()), raw) if field is not None else None
    return None if field is None or envelope is None else RelayProbe(field, route, envelope)
