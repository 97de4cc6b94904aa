"""A stream's ending policy: when the middleware, not the app's final body, ends a stream, why it ends and
what the client is told (an error event of the stream's format, a reconnect hint, or just the end).

Functions of the :class:`~.stream.Stream` (read through :class:`Ended`, what they need of it), not a
class of their own: a stream that ends by the app's final body, nearly every one, calls none of them and
makes nothing for them. The stream's narrow interfaces (what its writer, timers and guards may ask) hand
these on; :func:`finish` is its teardown's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from .._core import errors
from .._core.dialects.endings import CONTENT_FILTER
from .._core.errors import ErrorInfo, logger
from .._core.lifecycle import Lifecycle, Phase
from .._core.pipeline import Pipeline
from .._settings import StreamingSettings
from .recovery import Recovering
from .watcher import Watcher
from .writer import Writer

if TYPE_CHECKING:
    from .._telemetry.recorder import StreamTelemetry


class Ended(Protocol):
    """What the ending policy reads of a stream."""

    life: Lifecycle
    settings: StreamingSettings
    pipe: Pipeline
    telemetry: StreamTelemetry | None
    writer: Writer
    watcher: Watcher
    recovering: Recovering | None


def error_id(stream: Ended) -> str:
    """The id an error event and its log line share: the trace id when there is a span."""
    telemetry = stream.telemetry
    return errors.new_error_id(telemetry.trace_id if telemetry else None)


def stalled(stream: Ended, now: float) -> None:
    """The app said nothing for ``stall_timeout``: recovered when recovery is on, else the end."""
    recovering = stream.recovering
    if recovering is not None and recovering.stalled(now):
        return
    stream.life.end(errors.timeout(error_id(stream), stream.settings.stall_timeout))


def end_on_delete(stream: Ended) -> None:
    """Stopped on purpose (its chat's ``DELETE``): the app is cancelled and the stream ends cleanly where
    it is, its log complete (what was produced is the answer, as after the AI SDK's stop)."""
    life = stream.life
    if life.phase is Phase.STREAMING:
        if stream.telemetry is not None:
            stream.telemetry.mark("stopped")
        stream.watcher.stop()
        life.end()


def fail(stream: Ended, exc: Exception) -> None:
    """The server refused a write of ours: the stream failed, not the app."""
    life = stream.life
    detail, gone = stream.settings.error_detail, not life.connected
    life.fail(exc, errors.report(exc, detail=detail, error_id=error_id(stream), client_gone=gone))


def invalid_output(stream: Ended) -> ErrorInfo:
    """Why the output check ended the stream, for the client."""
    output = stream.pipe.check
    fault = output.fault if output is not None else None
    code = fault.code if fault is not None else "json_syntax"
    message = output.message() if output is not None else ""
    return errors.invalid_output(error_id(stream), message, code)


async def finish(stream: Ended, cancelled: bool, failure: Exception | None) -> None:
    """End a stream the app did not end itself: flush what was merged, say why it ended, and send the
    final body. Called by the stream's teardown, in a shielded and bounded scope."""
    life, pipe, settings = stream.life, stream.pipe, stream.settings
    info = life.ending
    if info is None and failure is not None:
        detail, gone = settings.error_detail, not life.connected
        info = errors.report(failure, detail=detail, error_id=error_id(stream), client_gone=gone)
    elif info is None and cancelled and life.connected:
        # Cancelled from outside (the server stopped waiting for us): tell the client to come back.
        info = errors.shutdown(error_id(stream), settings.shutdown_retry_ms)
    out = pipe.flush() if info is not None else pipe.close()
    complete = not life.abandoned
    # Not after the app's own end marker or error event: the client's stream is over already.
    if info is not None and not pipe.answered(stream.writer.last_frame):
        frame = pipe.error_frame(info)
        if frame is None:
            complete = False  # no in-band channel: cut the response so it cannot look complete
            logger.warning(
                "%s stream cut without its last chunk (%s, error id %s)", pipe.kind, info.type, info.id
            )
        else:
            out.append(frame)
    life.finished()
    error_type = errors.error_type_name(failure) if failure else info.type if info else None
    if error_type == CONTENT_FILTER:
        error_type = None  # a filter doing its job is no server error: the span says blocked, and why
    await stream.writer.ending(b"".join(out), complete=complete, error_type=error_type, exception=failure)
