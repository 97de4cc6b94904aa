"""What only the app knows about a request, for its stream's span: ``annotate(request.scope, ...)``.

Stored in the ASGI scope, like :func:`~sse_middleware.override`, and read when the stream ends, so a
route, a dependency or the generator itself may call it at any time before then.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any, Final

from opentelemetry.util.types import AttributeValue

__all__ = ["SCOPE_KEY", "annotate"]

SCOPE_KEY: Final = "sse_middleware.telemetry"
_SCALARS: Final = (str, bool, int, float)


def annotate(
    scope: MutableMapping[str, Any],
    attributes: Mapping[str, AttributeValue] | None = None,
    /,
    *,
    request_model: str | None = None,
) -> None:
    """Add ``attributes`` to this request's stream span, e.g. ``{"session.id": ..., "user.id": ...,
    "gen_ai.conversation.id": ..., "tenant.id": ...}``; they win over the middleware's own on the span.
    ``request_model`` names the requested model (``gen_ai.request.model``, on the span and the
    metrics) when the request body does not say it in a top-level ``"model"``, or says it wrongly.

    Span only: request-scoped values such as user ids on metrics would make one series per user.
    Later calls add to earlier ones. Values are checked here, so a mistake fails in the route.
    """
    for key, value in (attributes or {}).items():
        if not isinstance(key, str) or not key:
            raise TypeError(f"attribute names must be non-empty strings, got {key!r}")
        if not _valid(value):
            raise TypeError(f"attribute {key!r}: {value!r} is not an OpenTelemetry attribute value")
    if request_model is not None and (not isinstance(request_model, str) or not request_model):
        raise TypeError(f"request_model must be a non-empty string, got {request_model!r}")
    notes = scope.setdefault(SCOPE_KEY, {})
    if attributes:
        notes.setdefault("attributes", {}).update(attributes)
    if request_model is not None:
        notes["request_model"] = request_model


def _valid(value: object) -> bool:
    """A str, bool, int or float, or a sequence of one of them (the OpenTelemetry attribute types)."""
    if isinstance(value, _SCALARS):
        return True
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        kinds = {type(v) for v in value}
        return len(kinds) <= 1 and all(isinstance(v, _SCALARS) for v in value)
    return False
