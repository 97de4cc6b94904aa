"""The output side of one streaming response: the pipeline, the send gate, frames to the client (and to
the resume log), and how the stream ends (what it does at each deadline is in :mod:`.stream_timers`).

Made by the :class:`~.responder.Responder` when a response turns out to be a stream; the responder keeps
the request's lifecycle (phases, the app's receive, pass-through) and hands every body here. The
per-token path is :meth:`Stream.body` -> the pipeline -> :meth:`Stream.deliver` -> the real ``send``.

A resumable stream (``resume`` on, :mod:`.._resume`) sends every frame through its log first, which adds
the event ids. When its client leaves, the stream *detaches* instead of ending: the app keeps producing
into the log (it never hears of the disconnect) until it finishes, until nobody has followed the log for
``resume_abandon_after``, or until a shutdown's grace is over. On a shutdown the live client gets a
reconnect hint at once, while the app goes on producing for whoever resumes on another host.
"""

from __future__ import annotations

import math
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import anyio

from .._core import chat, errors, headers
from .._core.deadlines import FINALIZE_SECONDS, Clocks
from .._core.dialects.endings import CONTENT_FILTER
from .._core.errors import ErrorInfo, logger
from .._core.lifecycle import LIVE, Lifecycle, Phase
from .._core.pipeline import Pipeline
from .._settings import StreamingSettings
from .._types import Message, Send
from .disconnect import ClientWatch
from .gate import SendGate
from .stream_timers import BODY, StreamTimers
from .watcher import Watcher

if TYPE_CHECKING:
    from .._resume.log import StreamLog
    from .._telemetry.recorder import StreamTelemetry
    from .guards import GuardRunner


class Stream:
    """``life``: the response's lifecycle, whose named transitions are the only way this stream changes
    phase. ``forget``: the middleware no longer needs to drain this stream at a shutdown.
    ``may_listen``: whether the server says a client left only on ``receive`` (ASGI < 2.4), so that a
    listener of ours may have to read it."""

    __slots__ = (
        "__weakref__",  # its timers' link back (see stream_timers.py)
        "_chat",
        "_forget",
        "_may_listen",
        "_send_timeout",
        "_tell_stuck_at",
        "_trailers",
        "_write_scope",
        "client_watch",
        "clocks",
        "config",
        "cut",
        "detached",
        "disconnected",
        "ending",
        "failure",
        "gate",
        "guards",
        "life",
        "log",
        "pipe",
        "sending_since",
        "server_send",
        "settings",
        "telemetry",
        "timers",
        "watcher",
    )

    def __init__(
        self,
        life: Lifecycle,
        settings: StreamingSettings,
        pipe: Pipeline,
        telemetry: StreamTelemetry | None,
        send: Send,
        client_watch: ClientWatch,
        *,
        trailers: bool,
        forget: Callable[[], object],
        may_listen: bool,
    ) -> None:
        self.life = life
        self.client_watch = client_watch
        self._forget = forget
        self._may_listen = may_listen
        self.settings = settings
        self.config = pipe.config
        self.pipe = pipe
        self.telemetry = telemetry
        self.server_send = send
        self._trailers = trailers  # the start declared trailers: the server waits for them
        self.clocks = Clocks()
        self.clocks.last_write = self.clocks.last_app = time.monotonic()
        self.gate = SendGate()
        self.timers = StreamTimers(self)
        self.watcher = Watcher(self.timers.wake, self.timers.peek)
        self.log: StreamLog | None = None
        self.detached = False  # resumable and its client gone: frames go to the log only
        self.cut = False  # ended by us without a word to anyone (abandoned): the log is not complete
        self.disconnected = False
        self.ending: ErrorInfo | None = None  # why the middleware ends the stream, when it does
        self.failure: Exception | None = None  # a write of ours the server refused
        self.guards: GuardRunner | None = None  # set when the stream has guards
        self._send_timeout = settings.send_timeout  # 0: off
        # Whether each write must tell the watcher when it will be stuck. Not while heartbeats are no
        # further apart than the timeout: the watcher then wakes by last_write + heartbeat_interval,
        # no later than a write in flight is stuck, and from there it looks at stuck_at() itself.
        beat = pipe.config.heartbeat_interval if pipe.kind == headers.SSE else 0.0
        self._tell_stuck_at = bool(settings.send_timeout) and not 0 < beat <= settings.send_timeout
        self.sending_since = _NEVER  # when the write in flight began (the watcher gives up on it)
        self._write_scope: anyio.CancelScope | None = None  # a write that client_stuck() may cut
        self._chat: tuple[bytes, bytes, bytes] | None = None  # (path, caller, body) until indexed

    # -- the per-token path ----------------------------------------------------------------------------

    async def body(self, message: Message) -> None:
        body = message.get("body", b"")
        if type(body) is not bytes:
            if not isinstance(body, (bytearray, memoryview)):
                raise TypeError(f"http.response.body 'body' must be bytes, got {type(body).__name__}")
            body = bytes(body)
        if self.guards is not None:
            await self.guards.body(message, body)
            return
        # The gate is taken before the frame is made, not just around the send: a flush of the watcher's
        # that waited for a slow client must not overtake text this send hands the pipeline.
        gate, pipe = self.gate, self.pipe
        if gate.busy:
            await gate.acquire()
        else:
            gate.busy = True
        try:
            now = self.clocks.last_app = time.monotonic()
            out = pipe.feed(body, now) if body else []
            if pipe.fault:  # the output can no longer be what its request declared: it ends here
                if out:
                    await self.deliver(b"".join(out), now)
                self.end(self.invalid_output())
                return
            if not message.get("more_body", False):
                out.extend(pipe.close())
                await self.final_body(b"".join(out))
                return
            if out:
                data = out[0] if len(out) == 1 else b"".join(out)
                if self.log is not None:
                    await self.deliver(data, now)
                else:  # deliver() without a log, inlined: one coroutine less per token (docs/benchmarks.md)
                    if self._send_timeout:
                        self.sending_since = now
                        if self._tell_stuck_at:
                            self.watcher.want(now + self._send_timeout)
                    try:  # the app's own message when it is unchanged: no new dict per token
                        await self.server_send(message if data is message["body"] else _body(data))
                    except OSError:  # how ASGI >= 2.4 servers say the client is gone
                        if not self.client_left(cancel_app=False):
                            raise  # the app hears it, as it would without us
                        return
                    finally:
                        self.sending_since = _NEVER
                    self.clocks.last_write = now
                    if self.telemetry is not None:
                        self.telemetry.frame(len(data))
        finally:
            if gate.waiting is None:
                gate.busy = False
            else:
                gate.release()
        coalescer = pipe.coalescer
        if coalescer is not None and coalescer.due < self.watcher.target:  # inf: nothing is held
            self.watcher.want(coalescer.due)  # merged text waits: make sure someone wakes for it

    async def deliver(self, data: bytes, now: float) -> None:
        """One frame to the client (through the log first, when resumable), with the gate held. The
        app's own frames without a log take the same steps inlined in :meth:`body`."""
        log = self.log
        if log is not None:
            data = log.append(data)
            if self._chat is not None:
                self.index_chat()
            if self.detached:
                return
        if self._send_timeout:
            self.sending_since = now
            if self._tell_stuck_at:
                self.watcher.want(now + self._send_timeout)
        try:
            if log is None:  # a stuck write here is cut by cancelling the app (client_stuck)
                await self.server_send(_body(data))
            else:
                await self._send_cuttable(_body(data))
                if self.detached:
                    return  # cut: the client stopped reading; the frame is in the log for its resume
        except OSError:  # how ASGI >= 2.4 servers say the client is gone
            if not self.client_left(cancel_app=False):
                raise  # the app hears it, as it would without us
            return
        finally:
            self.sending_since = _NEVER
        self.clocks.last_write = now
        if self.telemetry is not None:
            self.telemetry.frame(len(data))

    async def extension(self, message: Message) -> None:
        """An extension message (trailers, zero-copy send, ...): after what we merged, untouched."""
        await self.gate.take()
        try:
            merged = b"".join(self.pipe.flush())
            if merged:
                await self.deliver(merged, time.monotonic())
            if not self.detached:
                if self._send_timeout:
                    self.sending_since = now = time.monotonic()
                    self.watcher.want(now + self._send_timeout)
                try:
                    await self._send_cuttable(message)
                finally:
                    self.sending_since = _NEVER
        finally:
            self.gate.release()

    async def final_body(self, data: bytes) -> None:
        """The app's final body, with the gate held. Still ours while it is written: a shutdown's hard
        stop may cut it when a client that stopped reading holds it."""
        self.life.closing()
        try:
            await self.last_write(data, complete=True)
        except OSError:
            if not self.client_left(cancel_app=False):
                raise
        self.life.closed()

    # -- the end -------------------------------------------------------------------------------------------

    async def finish(self, cancelled: bool, failure: Exception | None) -> None:
        """End a stream the app did not end itself: flush what was merged, say why it ended, and send the
        final body. Called by the host, in a shielded and bounded scope."""
        info = self.ending
        if info is None and failure is not None:
            detail, gone = self.settings.error_detail, self.disconnected
            info = errors.report(failure, detail=detail, error_id=self.error_id(), client_gone=gone)
        elif info is None and cancelled and not self.disconnected:
            # Cancelled from outside (the server stopped waiting for us): tell the client to come back.
            info = errors.shutdown(self.error_id(), self.settings.shutdown_retry_ms)
        out = self.pipe.flush() if info is not None else self.pipe.close()
        complete = not self.cut
        if info is not None:
            frame = self.pipe.error_frame(info)
            if frame is None:
                complete = False  # no in-band channel: cut the response so it cannot look complete
                logger.warning(
                    "%s stream cut without its last chunk (%s, error id %s)",
                    self.pipe.kind,
                    info.type,
                    info.id,
                )
            else:
                out.append(frame)
        self.life.finished()
        error_type = errors.error_type_name(failure) if failure else info.type if info else None
        if error_type == CONTENT_FILTER:
            error_type = None  # a filter doing its job is no server error: the span says blocked, and why
        await self.gate.take()
        try:
            await self.last_write(b"".join(out), complete=complete, error_type=error_type, exception=failure)
        except OSError:
            pass  # the client left as we said goodbye (ASGI >= 2.4)
        finally:
            self.gate.release()

    async def last_write(self, data: bytes, *, complete: bool, **end: Any) -> None:
        """The final body, with the gate held. Telemetry ends first: a tracing middleware around us ends
        its span when it sees this message, and ours must end inside it (and end even if this write is
        cancelled). A resumable stream's log gets the frame, then its end marker."""
        log = self.log
        if log is not None and data:
            data = log.append(data)
        check = self.pipe.check
        if check is not None and check.unreadable is not None:  # said once, at the stream's end
            logger.warning("output check off for a part of this stream: %s", check.unreadable)
            if self.telemetry is not None:
                self.telemetry.note("sse_middleware.output_check.unreadable", check.unreadable)
        if self.telemetry is not None:
            if data and not self.disconnected:
                self.telemetry.frame(len(data))
            self.telemetry.end(time.monotonic(), client_disconnected=self.disconnected, **end)
        try:
            if not self.disconnected:
                with self._bound_last_write() as bound:
                    await self.server_send({"type": BODY, "body": data, "more_body": not complete})
                    if complete and self._trailers and (self.ending or end.get("exception")):
                        self._trailers = False  # the app will not send the trailers it declared
                        trailers = {"type": "http.response.trailers", "headers": [], "more_trailers": False}
                        await self.server_send(trailers)
                if bound.cancelled_caught:
                    self._say_stuck("its last write")
                    self.disconnected = True
        finally:
            self.sending_since, self._write_scope = _NEVER, None
            if log is not None:
                self.log = None
                with anyio.move_on_after(FINALIZE_SECONDS, shield=True):
                    await log.close(complete)

    def _bound_last_write(self) -> anyio.CancelScope:
        """The final write's bound by ``send_timeout``. The app's final body is written while the watcher
        is still on (``CLOSING``): it cuts the write when it is stuck, so the scope needs no deadline of
        its own (a deadline is a loop timer armed and cancelled per stream). The host's last write comes
        after the watcher stopped: there the scope keeps its own."""
        timeout = self._send_timeout
        if timeout and self.life.phase is Phase.CLOSING and self.watcher.running:
            self.sending_since = now = time.monotonic()
            self.watcher.want(now + timeout)
            self._write_scope = anyio.CancelScope()
            return self._write_scope
        return anyio.move_on_after(timeout or None)

    def client_left(self, *, cancel_app: bool) -> bool:
        """The client is gone. A resumable stream detaches and its app goes on, unaware; otherwise the
        stream ends here, and the app is cancelled only if it cannot know. Whether it was taken care of
        (an ``OSError`` need not reach the app)."""
        if self.disconnected:
            return True
        self.disconnected = True
        life = self.life
        if life.phase is Phase.CLOSING:  # the app's last write failed (ASGI >= 2.4): it hears it there
            life.closed()
            return False
        if life.phase is not Phase.STREAMING:
            return False
        if self.log is not None and not self.log.failed:
            self.detach()
            return True
        self.watcher.stop()
        if cancel_app:
            life.end()  # the host's teardown finishes the stream's bookkeeping
            return True
        if self.telemetry is not None:
            self.telemetry.end(time.monotonic(), client_disconnected=True)
        life.client_gone()
        return False

    # -- a client that stopped reading -------------------------------------------------------------------

    async def _send_cuttable(self, message: Message) -> None:
        """A write :meth:`client_stuck` may cut without cancelling the app (a resumable stream's frames,
        an extension message): the caller then finds the stream detached or ended."""
        try:
            with anyio.CancelScope() as self._write_scope:
                await self.server_send(message)
        finally:
            self._write_scope = None

    def stuck_at(self) -> float:
        """When the write in flight will have taken too long (inf: none in flight, or no timeout)."""
        since = self.sending_since
        return since + self._send_timeout if since != _NEVER and not self.disconnected else _NEVER

    def client_stuck(self) -> None:
        """No write completed within ``send_timeout``: the client is gone for us, though its connection is
        not. Nothing more is written to it (the cut write may be half on the wire, and the next would
        only wait again): a resumable stream detaches, its app unaware and producing into the log;
        otherwise the stream ends as on a disconnect, the app cancelled (it cannot know)."""
        phase = self.life.phase
        if self.disconnected or (phase is not Phase.STREAMING and phase is not Phase.CLOSING):
            return
        if self._write_scope is not None:
            self._write_scope.cancel()
        if phase is Phase.CLOSING:  # the app's final body: last_write says it and ends the stream
            self.sending_since = _NEVER
            return
        self._say_stuck("a write")
        self.client_left(cancel_app=True)

    def _say_stuck(self, what: str) -> None:
        """One log line and a span attribute for a write that took longer than ``send_timeout``. The
        server closes the connection when the response ends without its last write."""
        resumable = self.log is not None and not self.log.failed and self.life.phase is Phase.STREAMING
        logger.warning(
            "the client stopped reading: %s took over send_timeout=%gs; %s",
            what,
            self._send_timeout,
            "detached (the stream goes on into its log)" if resumable else "it is given up",
        )
        if self.telemetry is not None:
            self.telemetry.mark("send_timeout")

    def detach(self) -> None:
        log = self.log
        if log is None:
            return
        self.detached = self.disconnected = True
        log.client_left()
        log.on_change = self._abandon_moved
        self._abandon_moved()

    def _abandon_moved(self) -> None:
        if self.log is not None and self.log.unwatched_since != math.inf:
            self.watcher.want(self.log.unwatched_since + self.settings.resume_abandon_after)

    def end(self, info: ErrorInfo | None) -> None:
        """End the stream from the middleware's side: the app is cancelled, the host's teardown sends
        ``info`` (None: nothing to say, the stream is cut; its log says it is incomplete)."""
        if self.life.phase is Phase.STREAMING:
            if info is None:
                self.cut = True
            self.ending = info
            self.life.end()

    # -- the AI SDK's resume: a chat's stream -------------------------------------------------------------

    def chat(self, path: bytes, who: bytes, body: bytes) -> None:
        """A resumable stream started by a POST to ``path`` with ``body``: once the stream is known to be
        the AI SDK's UI message stream (hinted at its start, or detected from its first part), the log is
        indexed by the body's chat id (see :mod:`.._core.chat`); then ``DELETE`` of it stops the stream."""
        self._chat = (path, who, body)
        self.index_chat()

    def index_chat(self) -> None:
        dialect = self.pipe.dialect
        if dialect.detecting or self._chat is None:
            return
        (path, who, body), self._chat = self._chat, None
        ident = chat.chat_id(body) if dialect.name == "ai-sdk" else None
        if ident is not None and self.log is not None:
            self.log.index(chat.chat_key(path, ident, who))
            self.log.on_stop(self.stop)

    def stop(self) -> None:
        """Stopped on purpose (its chat's ``DELETE``): the app is cancelled and the stream ends cleanly
        where it is, its log complete (what was produced is the answer, as after the AI SDK's stop)."""
        if self.life.phase is Phase.STREAMING:
            if self.telemetry is not None:
                self.telemetry.mark("stopped")
            self.watcher.stop()
            self.life.end()

    def fail(self, exc: Exception) -> None:
        """The server refused a write of ours: the stream failed, not the app."""
        self.failure = exc
        self.end(
            errors.report(
                exc,
                detail=self.settings.error_detail,
                error_id=self.error_id(),
                client_gone=self.disconnected,
            )
        )

    def invalid_output(self) -> ErrorInfo:
        """Why the output check ended the stream, for the client."""
        check = self.pipe.check
        fault = check.fault if check is not None else None
        code = fault.code if fault is not None else "json_syntax"
        message = check.message() if check is not None else ""
        return errors.invalid_output(self.error_id(), message, code)

    def error_id(self) -> str:
        return errors.new_error_id(self.telemetry.trace_id if self.telemetry else None)

    # -- the disconnect listener (run by the watcher while the app does not listen itself) ------------

    def listen_if_needed(self) -> None:
        """Start our listener if nobody would otherwise hear the client leave."""
        if (
            self._may_listen
            and not self.watcher.listening
            and self.life.phase is Phase.STREAMING
            and self.client_watch.can_listen()
        ):
            self.watcher.listen(self._listen)

    async def _listen(self) -> None:
        watch = self.client_watch
        if await watch.listen():  # the app did not hear it (unless it came back meanwhile)
            self.client_left(cancel_app=not watch.app_listening)

    def hide_disconnects(self) -> None:
        """A resumable stream: the app goes on when its client leaves, and never hears of it."""
        left = weakref.WeakMethod(self.client_left)  # weak: the watch is the stream's own, a cycle else

        def told() -> None:
            method = left()
            if method is not None:
                method(cancel_app=False)

        self.client_watch.hide_disconnects(told)

    # -- shutdown and teardown -------------------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        """A shutdown has begun for this stream."""
        return self.clocks.shutdown_at != math.inf

    def drain(self, grace: float) -> None:
        self.timers.drain(grace)

    def release(self) -> None:
        """No longer ours to look after (called once, by the lifecycle): no helper, no shutdown drain."""
        self.watcher.stop()
        forget, self._forget = self._forget, _nothing  # it holds the responder, which holds this stream
        forget()

    async def interrupted(self, failure: Exception | None) -> None:
        """The server stopped waiting for the response (uvicorn's ``--timeout-graceful-shutdown``): send
        the reconnect event now, not after unwinding, since uvicorn re-raises SIGTERM (ending the process)
        a few loop turns later."""
        if self.life.phase is Phase.STREAMING:
            self.watcher.stop()  # frees the gate if it was writing; joined in aclose()
            with anyio.move_on_after(FINALIZE_SECONDS, shield=True):
                await self.finish(True, failure)

    async def aclose(self, cancelled: bool, failure: Exception | None) -> None:
        """The one teardown, when the app's run is over (returned, raised or cancelled): whatever the
        stream still owes goes out, then nothing of ours outlives the response. Every await is shielded
        and bounded."""
        self.watcher.stop()  # first: nothing of ours may hold the gate or write after this
        if self.guards is not None:
            self.guards.stop()
        if self.watcher.has_child or self.guards is not None:  # a shielded scope only to wait for one
            with anyio.CancelScope(shield=True):
                await self.watcher.join()
                if self.guards is not None:
                    await self.guards.join()
        self.guards = None  # its runner holds this stream: kept, the two would be a reference cycle
        if self.life.phase in LIVE:
            with anyio.move_on_after(FINALIZE_SECONDS, shield=True):
                await self.finish(cancelled, failure or self.failure)
        if self.telemetry is not None:  # ends once; here in case a last write was cut short
            self.telemetry.end(time.monotonic(), client_disconnected=self.disconnected)
        log, self.log = self.log, None
        if log is not None:  # a last write that never came: the log says the stream was cut
            with anyio.move_on_after(FINALIZE_SECONDS, shield=True):
                await log.close(False)
        self.life.release()


_NEVER: Final = math.inf


def _nothing() -> None:
    return None


def _body(data: bytes) -> Message:
    return {"type": BODY, "body": data, "more_body": True}
