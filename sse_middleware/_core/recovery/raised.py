"""What an exception raised by an app's upstream client says about the upstream's answer: its HTTP status
and its ``Retry-After``, read by duck typing so that no SDK is imported.

The official OpenAI and Anthropic SDKs raise ``APIStatusError`` subclasses with ``status_code`` and the
``httpx.Response`` as ``response``; httpx raises ``HTTPStatusError`` with ``response``; other clients and
frameworks carry a ``status_code`` (or aiohttp's ``status``) on the exception itself.
"""

from __future__ import annotations

import email.utils
import time
from typing import Final

from ..errors import root_cause

RETRIED_4XX: Final = frozenset((408, 409, 429))
"""The 4xx statuses that say "try again" (a timeout, a conflict, a rate limit), as the official SDKs
retry them: every other 4xx says the request itself is at fault, and a re-run would fail the same way."""

RETRY_AFTER_MAX: Final = 30.0
"""The longest ``Retry-After`` recovery waits (seconds). An upstream that asks for longer is not asked
again: recovery gives up at once, rather than hold the client that long for an attempt."""


def status_of(exc: BaseException) -> int | None:
    """The HTTP status an exception carries, or None."""
    for found in _chain(exc):
        for owner in (found, getattr(found, "response", None)):
            for name in ("status_code", "status"):
                value = getattr(owner, name, None)
                if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
                    return value
    return None


def request_fault(exc: BaseException) -> int | None:
    """The status of an exception that says the request itself is wrong (a 4xx other than
    :data:`RETRIED_4XX`), or None."""
    status = status_of(exc)
    return status if status is not None and 400 <= status < 500 and status not in RETRIED_4XX else None


def retry_after(exc: BaseException, now: float | None = None) -> float | None:
    """The seconds an exception's response asks to wait (``retry-after-ms``, or ``Retry-After`` as seconds
    or an HTTP date), or None when it carries no such header. ``now``: the wall clock, for a date."""
    for found in _chain(exc):
        headers = getattr(getattr(found, "response", None), "headers", None)
        if headers is None:
            headers = getattr(found, "headers", None)
        seconds = _parse(headers, time.time() if now is None else now)
        if seconds is not None:
            return seconds
    return None


def _parse(headers: object, now: float) -> float | None:
    get = getattr(headers, "get", None)
    if get is None:
        return None
    millis = get("retry-after-ms")
    if isinstance(millis, str):
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = get("retry-after")
    if not isinstance(value, str):
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now)


def _chain(exc: BaseException) -> list[BaseException]:
    """The exception as the app's code saw it, and what it was raised from (``raise X from exc``)."""
    out: list[BaseException] = []
    found: BaseException | None = root_cause(exc)
    while found is not None and len(out) < 8:
        out.append(found)
        found = found.__cause__
    return out
