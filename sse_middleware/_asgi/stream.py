"""One streaming response: the parts it is made of, what it does when its client leaves or stops reading,
and the one teardown (:meth:`Stream.aclose`). Why the middleware ends a stream and what the client is
told then is :mod:`.stream_end`'s; the AI SDK chat index is :mod:`.chat_resume`'s.

Built ready to run by :mod:`.start`; the responder hands every body to :attr:`Stream.body`. Calls run one
way, from the stream to its parts: the :class:`~.writer.Writer` (the client side: the per-token path, the
only caller of the server's ``send``), the timers and their watcher, the guards, the disconnect listener.
A part that must end the stream gets a narrow interface to it (a weak proxy: no part keeps it alive),
never its pipeline, lock or clocks. Parts a stream may never need (the timers, the listener) are made
when first needed. The client's state and why the stream ended are the
:class:`~.._core.lifecycle.Lifecycle`'s. The client side (writer, pipeline, the lifecycle's client
state) holds nothing of one run of the app, so that another run could feed the same client.

A resumable stream sends every frame through its log first (which adds the event ids). When its client
leaves, it *detaches* instead of ending: the app, unaware, produces into the log until it finishes, until
nobody has followed the log for ``resume_abandon_after``, or until a shutdown's grace is over (at a
shutdown the live client gets a reconnect hint at once).
"""

from __future__ import annotations

import math
import time
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import anyio

from .._core import headers
from .._core.compress import Compressor
from .._core.deadlines import FINALIZE_SECONDS, next_deadline
from .._core.errors import ErrorInfo
from .._core.guarded import GuardedPipeline
from .._core.lifecycle import LIVE, Lifecycle, Phase
from .._core.pipeline import Pipeline
from .._settings import StreamingSettings
from .._types import Send
from . import stream_end
from .chat_resume import ChatIndex, ChatRequest
from .disconnect import ClientWatch, Listener, hide_disconnects
from .guards import Guard, GuardRunner
from .recovery import Plan, Recovering
from .stages import Body, Stage, compose
from .stream_timers import StreamTimers
from .watcher import Watcher
from .writer import Writer

if TYPE_CHECKING:
    from .._resume.log import StreamLog
    from .._telemetry.recorder import StreamTelemetry


class Stream:
    """``life``: the response's lifecycle, whose named transitions are the only way this stream changes
    phase or client state. ``forget``: the middleware no longer needs to drain this stream at a shutdown.
    ``may_listen``: whether the server says a client left only on ``receive`` (ASGI < 2.4), so that a
    listener of ours may have to read it. ``body``: the app's bodies go here (the writer's per-token
    path, or the guards')."""

    __slots__ = (
        "__weakref__",  # the parts' link back (a proxy: see the module's docstring)
        "_forget",
        "_me",
        "body",
        "client_watch",
        "guards",
        "life",
        "may_listen",
        "pipe",
        "recovering",
        "settings",
        "telemetry",
        "timers",
        "watcher",
        "writer",
    )

    def __init__(
        self,
        life: Lifecycle,
        settings: StreamingSettings,
        pipe: Pipeline,
        telemetry: StreamTelemetry | None,
        send: Send,
        client_watch: ClientWatch,
        trailers: bool,
        forget: Callable[[], object],
        may_listen: bool,
        log: StreamLog | None,
        guards: tuple[GuardedPipeline, Sequence[Guard]] | None,
        chat_request: ChatRequest | None,
        recovery: Plan | None = None,
        encoder: Compressor | None = None,
    ) -> None:
        me = weakref.proxy(self)
        self._me = me  # the one proxy the parts get, the lazy ones included
        self.life = life
        self._forget: Callable[[], object] | None = forget
        self.settings = settings
        self.pipe = pipe
        self.telemetry = telemetry
        self.watcher = Watcher(self)
        beat = pipe.config.heartbeat_interval if pipe.kind == headers.SSE else 0.0
        self.writer = Writer(
            send,
            life,
            pipe,
            telemetry,
            self.watcher,
            me,
            settings.send_timeout,
            beat,
            trailers,
            log,
            encoder,
        )
        self.timers: StreamTimers | None = None  # built when first asked: a short stream may never need them
        self.client_watch = client_watch
        self.may_listen = may_listen
        stages: list[Stage] = []  # the app's bodies reach the first (see stages.py)
        self.recovering: Recovering | None = None
        if recovery is not None:  # in front of everything: each run's bodies reach the rest spliced
            self.recovering = Recovering(recovery, settings, life, me, self.writer.clocks, telemetry)
            stages.append(self.recovering)
        self.guards: GuardRunner | None = None
        if guards is not None:
            guarded, fns = guards
            self.guards = GuardRunner(life, self.writer, guarded, fns, settings, telemetry, me)
            stages.append(self.guards)
        self.body: Body = compose(stages, self.writer.body) if stages else self.writer.body
        if log is not None:
            hide_disconnects(client_watch, me)
            if chat_request is not None:
                index = ChatIndex(pipe, log, chat_request, me)
                if not index():
                    self.writer.index = index
        life.stream(self._let_go)

    def begin(self) -> None:
        """The response started: look after it (its first deadline, a listener if nobody else listens)."""
        if self.client_watch.gone:
            self.client_left(cancel_app=False)  # the app heard it before it started: its business
            return
        writer = self.writer
        when = next_deadline(self.pipe.config, self.pipe, writer.clocks)  # no write is in flight yet
        if when != math.inf:  # none: no task, no timer
            writer.watcher.want(when)
        self.listen_if_needed()

    def listen_if_needed(self) -> None:
        """Start a listener of ours if nobody would otherwise hear the client leave: the server says it
        only on ``receive`` (``may_listen``) and the app does not listen itself (asked first, as it is
        cheap; :class:`~.disconnect.Listener` is made only now)."""
        if (
            self.may_listen
            and self.client_watch.can_listen()
            and not self.watcher.listening
            and self.life.phase is Phase.STREAMING
        ):
            self.watcher.listen(Listener(self.client_watch, self._me))

    # -- what the watcher asks (its owner: held weakly) ----------------------------------------------------

    def peek(self, now: float) -> float:
        return self._timers().peek(now)

    async def wake(self, now: float) -> float:
        return await self._timers().wake(now)

    def _timers(self) -> StreamTimers:
        timers = self.timers
        if timers is None:
            config = self.pipe.config
            timers = self.timers = StreamTimers(self.life, self.writer, config, self.settings, self._me)
        return timers

    # -- the client ----------------------------------------------------------------------------------------

    def client_left(self, *, cancel_app: bool) -> bool:
        """The client is gone. A resumable stream detaches and its app goes on, unaware; otherwise the
        stream ends here, and the app is cancelled only if it cannot know. Whether it was taken care of
        (an ``OSError`` need not reach the app)."""
        life = self.life
        if not life.connected:
            return True
        log = self.writer.log
        if life.phase is Phase.STREAMING and log is not None and not log.failed:
            self.detach()
            return True
        life.client_left()
        if life.phase is Phase.CLOSING:  # the app's last write failed (ASGI >= 2.4): it hears it there
            life.closed()
            return False
        if life.phase is not Phase.STREAMING:
            return False
        self.watcher.stop()
        if cancel_app:
            life.end()  # the host's teardown finishes the stream's bookkeeping
            return True
        if self.telemetry is not None:
            self.telemetry.end(time.monotonic(), client_disconnected=True)
        life.client_gone()
        return False

    def client_stuck(self) -> None:
        """No write completed within ``send_timeout``: the client is gone for us, though its connection is
        not. Nothing more is written to it (the cut write may be half on the wire, and the next would
        only wait again): a resumable stream detaches, its app unaware and producing into the log;
        otherwise the stream ends as on a disconnect, the app cancelled (it cannot know)."""
        life = self.life
        phase = life.phase
        if not life.connected or (phase is not Phase.STREAMING and phase is not Phase.CLOSING):
            return
        self.writer.cut()
        if phase is Phase.CLOSING:  # the app's final body: Writer.last says it and ends the stream
            return
        log = self.writer.log
        self.writer.say_stuck("a write", log is not None and not log.failed)
        self.client_left(cancel_app=True)

    def detach(self) -> None:
        log = self.writer.log
        if log is None:
            return
        self.life.detach()
        log.client_left()
        log.on_change = self._abandon_moved
        self._abandon_moved()

    def abandoned_at(self) -> float:
        """When a detached stream that nobody follows is abandoned (inf: never)."""
        log = self.writer.log
        return math.inf if log is None else log.unwatched_since + self.settings.resume_abandon_after

    def _abandon_moved(self) -> None:
        log = self.writer.log
        if log is not None and log.unwatched_since != math.inf:
            self.watcher.want(self.abandoned_at())

    # -- the middleware ends it (why, and what the client is told: stream_end.py) -------------------------

    def end(self, info: ErrorInfo | None) -> None:
        """End the stream from the middleware's side: the app is cancelled, the host's teardown sends
        ``info`` (None: just the end)."""
        self.life.end(info)

    def stalled(self, now: float) -> None:
        stream_end.stalled(self, now)

    def abandon(self) -> None:
        """A detached stream nobody follows: cut without a word; its log says it is incomplete."""
        self.life.abandon()

    def end_on_delete(self) -> None:
        stream_end.end_on_delete(self)

    def fail(self, exc: Exception) -> None:
        stream_end.fail(self, exc)

    def invalid_output(self) -> ErrorInfo:
        return stream_end.invalid_output(self)

    def error_id(self) -> str:
        return stream_end.error_id(self)

    # -- shutdown and teardown -----------------------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        """A shutdown has begun for this stream."""
        return self.writer.clocks.shutdown_at != math.inf

    def drain(self, grace: float) -> None:
        self._timers().drain(grace)

    def _let_go(self) -> None:
        """No longer ours to look after (called once, by the lifecycle): no helper, no shutdown drain."""
        self.watcher.stop()
        forget, self._forget = self._forget, None  # it holds the responder, which holds this stream
        if forget is not None:
            forget()

    async def interrupted(self, failure: Exception | None) -> None:
        """The server stopped waiting for the response (uvicorn's ``--timeout-graceful-shutdown``): send
        the reconnect event now, not after unwinding, since uvicorn re-raises SIGTERM (ending the process)
        a few loop turns later."""
        if self.life.phase is Phase.STREAMING:
            self.watcher.stop()  # frees the lock if it was writing; joined in aclose()
            with anyio.move_on_after(FINALIZE_SECONDS, shield=True):
                await stream_end.finish(self, True, failure)

    async def aclose(self, cancelled: bool, failure: Exception | None) -> None:
        """The one teardown, when the app's run is over (returned, raised or cancelled): whatever the
        stream still owes goes out, then nothing of ours outlives the response. Every await is shielded
        and bounded."""
        watcher, life = self.watcher, self.life
        try:
            if not watcher.stopped:  # stopped already when the app's final body let the stream go
                watcher.stop()  # first: nothing of ours may hold the lock or write after this
            guards = self.guards
            if guards is not None and failure is not None and life.phase is Phase.STREAMING:
                with anyio.move_on_after(FINALIZE_SECONDS, shield=True):
                    await watcher.join()
                    await guards.settle()  # what the app produced before it raised, checked
            if guards is not None:
                guards.stop()
            if watcher.child is not None or guards is not None:  # a shielded scope only to wait for one
                with anyio.CancelScope(shield=True):
                    await watcher.join()
                    if guards is not None:
                        await guards.join()
            if life.phase in LIVE:
                with anyio.move_on_after(FINALIZE_SECONDS, shield=True):
                    await stream_end.finish(self, cancelled, failure or life.write_failure)
            if self.telemetry is not None:  # ends once; here in case a last write was cut short
                self.telemetry.end(time.monotonic(), client_disconnected=not life.connected)
            log, self.writer.log = self.writer.log, None
            if log is not None:  # a last write that never came: the log says the stream was cut
                with anyio.move_on_after(FINALIZE_SECONDS, shield=True):
                    await log.close(False)
        finally:
            life.let_go()  # whatever happened above: the middleware's set of open streams holds it
