"""The writes that end a stream's client side: the app's final body, the middleware's own ending, and a
resumable stream's goodbye at a shutdown. A part of :class:`~.writer.Writer` (its base class), kept apart
because the last write has rules of its own: telemetry ends first, trailers, the log's end marker, and a
deadline of its own once the watcher stopped."""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

import anyio

from .._core.deadlines import FINALIZE_SECONDS
from .._core.errors import logger
from .._core.lifecycle import Phase
from .._types import Message
from .backend import TaskCut, cancel_scope, cuttable
from .watcher import scope_time
from .write_lock import BODY, WriterState


class LastWrites(WriterState):
    """The last writes of :class:`~.writer.Writer`, which holds the state (its slots) they use."""

    __slots__ = ()

    if TYPE_CHECKING:

        async def frame(self, data: bytes, now: float, until: float = math.inf) -> bool: ...

        async def put(
            self,
            message: Message,
            now: float,
            size: int = -1,
            until: float = math.inf,
            cut: anyio.CancelScope | TaskCut | None = None,
        ) -> bool | None: ...

    async def goodbye(self, hint: bytes, now: float) -> bool | None:
        """A resumable stream's live client sent away (at a shutdown): what was merged, then ``hint`` as
        the response's clean end (not logged: followers must not replay it), both within
        ``send_timeout``. None: the client was gone (already, or as we said goodbye, when the stream
        detached); else whether the client was stuck."""
        await self.lock.take()
        try:
            if not self.life.connected:
                return None
            until = now + self.timeout if self.timeout else math.inf
            merged = b"".join(self.pipe.flush())
            if merged and not await self.frame(merged, now, until):
                return time.monotonic() >= until
            if self.life.connected:
                end = {"type": BODY, "body": hint, "more_body": False}
                written = await self.put(end, now, -1, until, cancel_scope(scope_time(until)))
                return None if written is None else not written
            return False
        except OSError:  # the client left as we said goodbye (ASGI >= 2.4)
            return False
        finally:
            self.lock.free()

    def say_stuck(self, what: str, resumable: bool) -> None:
        """One log line and a span attribute for a write that took longer than ``send_timeout``. The
        server closes the connection when the response ends without its last write."""
        logger.warning(
            "the client stopped reading: %s took over send_timeout=%gs; %s",
            what,
            self.timeout,
            "detached (the stream goes on into its log)" if resumable else "it is given up",
        )
        if self.telemetry is not None:
            self.telemetry.mark("send_timeout")

    # -- the last write ------------------------------------------------------------------------------------

    async def final(self, data: bytes) -> None:
        """The app's final body, with the lock held, which it frees. Still ours while it is written: a
        shutdown's hard stop may cut it when a client that stopped reading holds it. A client gone as it
        is written (``OSError``, ASGI >= 2.4) is :meth:`put`'s to tell the stream; the app hears it, as
        without us."""
        life = self.life
        try:
            life.closing()
            await self.last(data, complete=True)
        finally:
            self.lock.free()
        if life.phase is Phase.CLOSING:  # not yet closed by a disconnect seen while it was written
            life.closed()

    async def ending(self, data: bytes, *, complete: bool, **end: Any) -> None:
        """The stream's end as the middleware writes it (see :meth:`last`), with the lock."""
        await self.lock.take()
        try:
            await self.last(data, complete=complete, **end)
        except OSError:
            pass  # the client left as we said goodbye (ASGI >= 2.4)
        finally:
            self.lock.free()

    async def last(self, data: bytes, *, complete: bool, **end: Any) -> None:
        """The final body, with the lock held. Telemetry ends first: a tracing middleware around us ends
        its span when it sees this message, and ours must end inside it (and end even if this write is
        cancelled). A resumable stream's log gets the frame, then its end marker."""
        log, life = self.log, self.life
        if log is not None and data:
            data = log.append(data)
        output = self.pipe.check  # the output check ("a check" is what a guard is shown)
        if output is not None and output.unreadable is not None:  # said once, at the stream's end
            logger.warning("output check off for a part of this stream: %s", output.unreadable)
            if self.telemetry is not None:
                self.telemetry.note("sse_middleware.output_check.unreadable", output.unreadable)
        if self.telemetry is not None:
            if data and life.connected:
                self.telemetry.frame(len(data))
            self.telemetry.end(time.monotonic(), client_disconnected=not life.connected, **end)
        try:
            if life.connected:
                # While the watcher runs (the app's final body) it cuts a stuck write; after it stopped
                # (the host's teardown) the write keeps a deadline of its own.
                # put() tells the watcher when this write will be stuck (or it wakes for a heartbeat
                # first, and then looks at stuck_at()).
                timeout = self.timeout
                until = math.inf
                now = 0.0
                if timeout:
                    now = time.monotonic()
                    if life.phase is not Phase.CLOSING or self.watcher.stopped:
                        until = now + timeout
                # No deadline (the watcher cuts it): no scope either, on asyncio (see backend.cuttable).
                deadline = until if until == math.inf else scope_time(until)
                last = {"type": BODY, "body": data, "more_body": not complete}
                written = await self.put(last, now, -1, until, cuttable(deadline))
                if written and complete and self._trailers and (life.ending or end.get("exception")):
                    self._trailers = False  # the app will not send the trailers it declared
                    trailers = {"type": "http.response.trailers", "headers": [], "more_trailers": False}
                    written = await self.put(trailers, now, -1, until, cuttable(deadline))
                if written is False:
                    self.say_stuck("its last write", False)
                    if life.connected:
                        life.client_left()
        finally:
            if log is not None:
                self.log = None
                with anyio.move_on_after(FINALIZE_SECONDS, shield=True):
                    await log.close(complete)
