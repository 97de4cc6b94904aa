"""A stream whose producer died: its host was killed (an OOM kill, a lost node), so its log has no end
marker and its lease in the store ran out (see :mod:`.._resume.redis_store`). Whoever reads that log
must not end it as if it were whole: a client would take a truncated answer for the answer.

:func:`orphan_ending` is what a resumed response ends with then: the stream's own error event, in its
format (read from the settings, the response's headers or the log's first event with data), so every
client sees a failure (the openai SDK raises ``APIError``, the AI SDK shows its error part).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from .._core.dialects import BY_NAME, detect
from .._core.dialects.base import Dialect, Generic
from .._core.dialects.endings import sse_error
from .._core.dialects.registry import hinted
from .._core.errors import INTERNAL, ErrorInfo, logger, new_error_id
from .._resume.store import Store, StoreError
from .._settings import StreamingSettings

PRODUCER_GONE: Final = "The server producing this stream stopped before it ended."
_FIRST_READS: Final = 4  # batches read looking for the first event with data (comments come before it)


async def dialect_of(
    store: Store, stream: str, settings: StreamingSettings, headers: Iterable[tuple[bytes, bytes]]
) -> Dialect:
    """The stream's format, as its producer read it: the settings' name, the response's header hint,
    or detected from the log's first event with data (generic SSE when the log no longer holds it)."""
    if settings.dialect != "auto":
        return BY_NAME[settings.dialect].named(settings.json_text_field)
    hint = hinted(headers)
    if hint is not None:
        return hint()
    try:
        async with store.reader(stream, 0) as reader:
            for _ in range(_FIRST_READS):
                entries, end = await reader.read(0)
                for raw in entries:
                    found = detect(raw)
                    if found is not None:
                        return found
                if end is not None or not entries:
                    break
    except StoreError:
        pass  # trimmed, or the store failed: the generic error event still says it failed
    return Generic()


async def orphan_ending(
    store: Store, stream: str, settings: StreamingSettings, headers: Iterable[tuple[bytes, bytes]]
) -> bytes:
    """The error event that ends a resumed response whose producer died (or whose log was cut)."""
    info = ErrorInfo(INTERNAL, PRODUCER_GONE, new_error_id(None))
    logger.warning("resumed stream %s: its producer stopped before its end (error id %s)", stream, info.id)
    dialect = await dialect_of(store, stream, settings, headers)
    return dialect.error_event(info) or sse_error(info)
