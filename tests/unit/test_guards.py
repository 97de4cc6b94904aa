"""Guards: the sans-I/O gate (any chunking, hold mode never releases text no guard passed; checks end
at word boundaries; one final per part) and the ASGI shell, on asyncio and trio, against the unguarded
app as control."""

from __future__ import annotations

import json
import time
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sse_middleware import Blocked, ConfigError, StreamingMiddleware, StreamingSettings, guard
from sse_middleware._core.dialects import Delta
from sse_middleware._core.guard import Check, GuardGate
from sse_middleware._core.wire import TEXT, Part

from ..support.harness import SSE, Wire, body, scope, serve, start

pytestmark = pytest.mark.anyio


# -- the sans-I/O gate -------------------------------------------------------------------------------------

words = st.lists(st.sampled_from(["a", "bb", "secret", "ccc ", " ", "dd\n", "é", "x y"]), max_size=30)


def _drive(tokens: list[str], blocked: str | None, checks: list[Check]) -> tuple[str, bool]:
    """Feed ``tokens`` as deltas, running a guard after each; what was released, and whether tripped."""
    gate = GuardGate(hold=True, max_bytes=16, dialect="t", scope={})
    released: list[str] = []

    def run() -> bool:
        while (check := gate.next_check()) is not None:
            checks.append(check)
            if blocked is not None and blocked in check.new:
                gate.failed()
                return False
            gate.passed(check)
            for item in gate.release():
                assert isinstance(item, Delta)
                released.append(item.text)
        return True

    for token in tokens:
        gate.text(Delta("k", (b"", b""), token), TEXT, "k")
        if not run():
            return "".join(released), True
    gate.close()
    ok = run()
    return "".join(released), not ok


@given(words)
def test_hold_releases_only_what_passed_and_cuts_at_words(tokens: list[str]) -> None:
    checks: list[Check] = []
    released, tripped = _drive(tokens, "secret", checks)
    text = "".join(tokens)
    assert text.startswith(released)  # a prefix of the app's text
    approved = "".join(c.new for c in checks if "secret" not in c.new)
    assert approved.startswith(released) and "secret" not in released  # only what a check passed
    for check in checks:  # each cut at whitespace, the part's end, or a word longer than max_bytes
        assert check.final or not check.new or check.new[-1].isspace() or len(check.new.encode()) > 16
    if not tripped:
        assert released == text
        assert [c.final for c in checks].count(True) == (1 if text else 0)  # one final per part
    if "secret" in text:
        assert tripped and len(released) <= text.index("secret")  # not even a prefix of the word


def test_hold_checks_a_word_longer_than_max_bytes_as_it_is() -> None:
    """A word longer than ``max_bytes`` (a URL, a base64 blob) is checked as it is, not held to the next
    space (which may be the end of the stream); a shorter one waits for its end. Each run passes every
    check and collects what it released, without a space or the stream's end after the word."""

    def released(pieces: list[str]) -> tuple[str, list[str]]:
        gate = GuardGate(hold=True, max_bytes=16, dialect="t", scope={})
        out, news = [], []
        for piece in pieces:
            gate.text(Delta("k", (b"", b""), piece), TEXT, "k")
            while (check := gate.next_check()) is not None:
                news.append(check.new)
                gate.passed(check)
            out += [item.text for item in gate.release() if isinstance(item, Delta)]
        return "".join(out), news

    text, news = released(["see ", *["abcdefgh"] * 5])  # a 40-byte word, no space after it
    # Checked once its unchecked part is past 16 bytes (at 24); the 16 after that wait for more.
    assert text == "see " + "abcdefgh" * 3 and news == ["see ", "abcdefgh" * 3]
    short, _ = released(["see ", "abcdefgh"])  # the control: 8 bytes wait for their word's end
    assert short == "see "


def test_structural_events_keep_their_place_and_the_end_waits_for_final() -> None:
    gate = GuardGate(hold=True, max_bytes=64, dialect="t", scope={})
    gate.event(b"start")
    assert gate.release() == []  # after the last text: waits for text (or the end)
    gate.text(Delta("k", (b"", b""), "Hello wor"), TEXT, "k")
    gate.text(Delta(("t",), (b"", b""), '{"a":'), Part("tool_arguments", "f"), ("t",))
    check = gate.next_check()
    assert check is not None and check.new == "Hello " and not check.final
    gate.passed(check)
    out = gate.release()
    assert out[0] == b"start" and isinstance(out[1], Delta) and out[1].text == "Hello "
    gate.event(b"[DONE]")  # a boundary: the rest of each part is checkable now
    seen = []
    while (check := gate.next_check()) is not None:
        seen.append((check.part, check.new, check.final, check.tool))
        gate.passed(check)
    assert seen == [("text", "world"[:3], False, None), ("tool_arguments", '{"a":', False, "f")]
    assert gate.release()[-1:] != [b"[DONE]"]  # the end marker waits for the final checks
    gate.close()
    finals = []
    while (check := gate.next_check()) is not None:
        finals.append((check.part, check.final, check.text))
        gate.passed(check)
    assert finals == [("text", True, "Hello wor"), ("tool_arguments", True, '{"a":')]
    assert gate.release()[-1] == b"[DONE]"


def test_observe_releases_at_once_and_still_checks() -> None:
    gate = GuardGate(hold=False, max_bytes=64, dialect="t", scope={})
    gate.text(Delta("k", (b"", b""), "Hel"), TEXT, "k")
    assert [d.text for d in gate.release() if isinstance(d, Delta)] == ["Hel"]
    gate.close()
    check = gate.next_check()
    assert check is not None and check.final and check.new == "Hel"


# -- the ASGI shell ------------------------------------------------------------------------------------------


def _chunk(text: str) -> bytes:
    obj = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
    }
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


TOKENS = ["Hello ", "wor", "ld, ", "the ", "sec", "ret ", "is ", "out", "."]


class App:
    """``fail``: ``"after"``, the app raises once its ``[DONE]`` is sent (a cleanup that fails);
    ``"mid"``, it raises after its last token, with no ``[DONE]``."""

    def __init__(self, tokens: list[str] = TOKENS, gap: float = 0.005, fail: str | None = None) -> None:
        self.tokens, self.gap, self.produced, self.fail = tokens, gap, 0, fail

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send(start(SSE))
        for token in self.tokens:
            await send(body(_chunk(token)))
            self.produced += 1
            await anyio.sleep(self.gap)
        if self.fail == "mid":
            raise RuntimeError("the upstream went away")
        await send(body(b"data: [DONE]\n\n", more=self.fail == "after"))
        if self.fail == "after":
            raise RuntimeError("a cleanup after the answer failed")


def _text(wire: Wire) -> str:
    out = []
    for event in wire.events():
        if event.data != "[DONE]":
            for choice in json.loads(event.data).get("choices", []):
                out.append(choice["delta"].get("content") or "")
    return "".join(out)


def _blocker(word: str, seen: list[Check] | None = None) -> Any:
    def check(c: Check) -> None:
        if seen is not None:
            seen.append(c)
        if word in c.new:
            raise Blocked("Filtered.", code="word")

    return check


async def test_a_guard_sees_whole_words_and_one_final(anyio_backend: str) -> None:
    seen: list[Check] = []
    control = await serve(App())
    wire = await serve(App(), guards=[_blocker("nothing", seen)])
    assert _text(wire) == _text(control) == "".join(TOKENS)
    assert [c.final for c in seen].count(True) == 1 and seen[-1].final
    assert all(c.final or c.new[-1].isspace() for c in seen if c.new)
    assert seen[-1].text == "".join(TOKENS) and wire.events()[-1].data == "[DONE]"


async def test_a_trip_ends_as_content_filter_with_nothing_of_the_word(anyio_backend: str) -> None:
    control = await serve(App())
    app = App()
    wire = await serve(app, guards=[_blocker("secret")])
    assert "sec" in _text(control)
    assert "sec" not in _text(wire) and _text(wire) == "Hello world, the "
    last = json.loads(wire.events()[-2].data)
    assert last["choices"][0]["finish_reason"] == "content_filter" and last["id"] == "c1"
    assert last["content_filter"]["code"] == "word" and wire.events()[-1].data == "[DONE]"
    assert app.produced < len(TOKENS)  # the app was cancelled


async def test_a_broken_guard_fails_closed_and_leaks_nothing(anyio_backend: str) -> None:
    def broken(check: Check) -> None:
        if "the" in check.new:
            raise ValueError("internal detail 42")

    wire = await serve(App(), guards=[broken])
    assert "the" not in _text(wire) and b"internal detail" not in wire.data
    assert b'"error"' in wire.data  # the format's error event
    allowed = await serve(App(), guards=[broken], guard_failure="allow")
    assert _text(allowed) == "".join(TOKENS) and b'"error"' not in allowed.data


async def test_an_async_guard_past_its_timeout_is_a_fault(anyio_backend: str) -> None:
    async def slow(check: Check) -> None:
        await anyio.sleep(1)

    wire = await serve(App(), guards=[slow], guard_timeout=0.05)
    assert _text(wire) == "" and b'"error"' in wire.data


async def test_an_app_that_raises_keeps_the_text_it_produced_checked(anyio_backend: str) -> None:
    """Hold mode with a guard slower than the tokens: when the app raises, the text the guards had not
    seen yet still gets its checks and goes out before the ending. After ``[DONE]``: the whole answer and
    nothing added; mid-answer: all the text, then the error event. A trip in those last checks still
    ends as content filter. Control: the unguarded app gives the same text. Mutation: no
    ``GuardRunner.settle`` in the stream's teardown -> the unchecked tail is lost."""

    async def slow(check: Check) -> None:
        await anyio.sleep(0.03)

    whole = "".join(TOKENS)
    for fail in ("after", "mid"):
        control = await serve(App(fail=fail))
        wire = await serve(App(fail=fail), guards=[slow])
        assert _text(wire) == _text(control) == whole, fail
        assert (wire.events()[-1].data == "[DONE]") is (fail == "after")
        assert (b'"error"' in wire.data) is (fail == "mid") and wire.complete
    wire = await serve(App(fail="after"), guards=[slow, _blocker("secret")])
    assert "sec" not in _text(wire) and b"content_filter" in wire.data


async def test_half_an_event_before_the_apps_failure_is_dropped_not_checked(anyio_backend: str) -> None:
    """The app raises with half an event sent: as without guards, that half is dropped, so the error
    event that follows is read whole. Mutation: ``end_of_body(failed=True)`` handing the half to the
    gate -> the half goes out and swallows the error event's lines."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send(start(SSE))
        await send(body(_chunk("Hello ")))
        await send(body(b'data: {"half-of-an-event'))
        raise RuntimeError("the upstream went away")

    for guards in ([], [_blocker("nothing")]):  # the control: unguarded
        wire = await serve(app, guards=guards)
        assert _text(wire) == "Hello " and b"half-of-an-event" not in wire.data
        assert "error" in json.loads(wire.events()[-1].data), guards


async def test_observe_does_not_delay_the_first_text(anyio_backend: str) -> None:
    """Told by order, not by a clock: in observe mode the first text goes out before the first check
    has passed; in hold mode (the control) only after it."""
    for mode, before_the_check in (("observe", True), ("hold", False)):
        order: list[str] = []

        async def slow(check: Check, order: list[str] = order) -> None:
            await anyio.sleep(0.2)
            order.append("check passed")

        wire = Wire()
        real_send = wire.send

        async def send(message: Any, real_send: Any = real_send, order: list[str] = order) -> None:
            if message.get("body") and "first text" not in order:
                order.append("first text")
            await real_send(message)

        mw = StreamingMiddleware(App(), StreamingSettings(telemetry=False, guard_mode=mode), guards=[slow])
        await mw(scope(), wire.receive, send)
        assert (order.index("first text") < order.index("check passed")) is before_the_check, mode
        assert _text(wire) == "".join(TOKENS)


async def test_a_slow_guard_checks_far_fewer_times_than_tokens(anyio_backend: str) -> None:
    tokens = [f"w{i} " for i in range(100)]
    checks: list[Check] = []

    async def slow(check: Check) -> None:
        checks.append(check)
        await anyio.sleep(0.1)

    began = time.monotonic()
    await serve(App(tokens, gap=0.01))
    alone = time.monotonic() - began
    began = time.monotonic()
    wire = await serve(App(tokens, gap=0.01), guards=[slow])
    guarded = time.monotonic() - began
    assert _text(wire) == "".join(tokens)
    assert len(checks) < len(tokens) / 4
    assert guarded < alone + 5 * 0.1 + 0.5  # generous: a few check times, not one per token


async def test_request_guards_and_bad_guards(anyio_backend: str) -> None:
    with pytest.raises(ConfigError):
        await serve(StreamingMiddleware(App(), guards=["not a function"]))

    async def app(scope: Any, receive: Any, send: Any) -> None:
        guard(scope, _blocker("secret"))
        await App()(scope, receive, send)

    wire = await serve(app)
    assert "sec" not in _text(wire)


async def test_generic_sse_is_checked_past_its_first_event(anyio_backend: str) -> None:
    """Events that are not JSON (generic SSE: each event's data is a check unit), the word in the third
    one, with an ``id:`` line: blocked, never sent. Control: unguarded, it goes out. Killed by the
    guarded pipeline taking the plain one's opaque lane once the format is known (every event after the
    first batch then went out unread), and by reading data with ``simple()`` only (an event with an id
    line was a structural event)."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send(start(SSE))
        for frame in (
            b"data: hello\n\n",
            b"data: world\n\n",
            b"id: 3\ndata: the secret\n\n",
            b"data: bye\n\n",
        ):
            await send(body(frame))
            await anyio.sleep(0.001)
        await send(body(b"", more=False))

    assert b"secret" in (await serve(app)).data
    wire = await serve(app, guards=[_blocker("secret")])
    assert b"secret" not in wire.data and b"hello" in wire.data
    assert json.loads(wire.events()[-1].data)["error"]["type"] == "content_filter"
