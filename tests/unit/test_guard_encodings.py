"""A guard sees every character the client gets, whichever of its format's encodings carried it.

A format often allows two encodings of the same text (AG-UI's START/CONTENT/END and ``*_CHUNK`` forms,
an OpenAI role chunk with or without content, a delta with or without a field that stops it merging);
a guard proved on one of them only is walked past by the other. So the property is over all of them
(:mod:`tests.support.encodings`): the guarded pipeline, a guard that passes everything and records what
it was shown, and the client's own reading of the bytes that came out. Per part, the guard saw exactly
the text the client has, as one text (a word cut across two encodings is still one word to it).

Without ``Dialect.texts`` (every event that is no delta passed as structural, unread) the text of an
opening chunk, of a chunk with a finish reason, of a second choice, of a block's start... reaches the
client unseen; without ``Dialect.part_key`` (a part keyed by its merge key) an OpenAI role chunk's text
and the text after it are two texts to a guard, and AG-UI's two forms of one message are too.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sse_middleware._core import headers
from sse_middleware._core.config import CoreConfig
from sse_middleware._core.guard import Check
from sse_middleware._core.guarded import GuardedPipeline
from sse_middleware._core.jsoncheck.request import DeclaredSchemas
from sse_middleware._core.output_check import OutputCheck
from sse_middleware._core.pipeline import Pipeline
from sse_middleware._core.wire import Part

from ..support import encodings


def guarded(events: list[bytes], config: dict[str, Any]) -> tuple[bytes, dict[object, str]]:
    """The bytes a guarded stream sends (hold mode, every check passed), and the text per part its guard
    was shown."""
    pipe = GuardedPipeline(headers.SSE, CoreConfig(**config), None, hold=True, scope={})
    out: list[bytes] = []
    seen: dict[object, str] = {}

    def checks() -> None:
        check: Check | None
        while (check := pipe.gate.next_check()) is not None:
            seen[check.key] = seen.get(check.key, "") + check.new
            pipe.gate.passed(check)
            out.extend(pipe.release(0.0))

    for raw in events:
        out.extend(pipe.feed(raw, 0.0))
        checks()
    pipe.end_of_body()
    checks()
    out.extend(pipe.close())
    return b"".join(out), {key: text for key, text in seen.items() if text}


@pytest.mark.parametrize("fmt", sorted(encodings.FORMATS))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_the_guard_sees_every_character_the_client_gets(fmt: str, data: Any) -> None:
    events, config = encodings.draw(data, fmt)
    body, seen = guarded(events, config)
    client = encodings.client(fmt, body)
    assert client == encodings.client(fmt, b"".join(events))  # nothing lost on the way (the control)
    assert sorted(seen.values()) == sorted(client.values())


class Recorder(OutputCheck):
    """An output check that passes everything and records the text it was fed, per part."""

    def __init__(self) -> None:
        super().__init__(DeclaredSchemas(content=True))
        self.seen: dict[object, str] = {}

    def feed(self, part: Part, key: Any, text: str) -> int | None:
        self.seen[key] = self.seen.get(key, "") + text
        return None


@pytest.mark.parametrize("fmt", sorted(set(encodings.FORMATS) - {"sse"}))  # generic SSE has no parts
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_the_output_check_reads_every_character_the_client_gets(fmt: str, data: Any) -> None:
    """The same property for ``validate_json`` without guards (the plain pipeline's checked path): per
    part, the check reads exactly the client's text. Killed by ``Pipeline._feed_checked`` not feeding
    ``carried()`` text (opening chunks, chunks with a finish reason...) and by keying the check by the
    merge key (an OpenAI role chunk's content and the next chunk's are then two documents)."""
    events, config = encodings.draw(data, fmt)
    check = Recorder()
    pipe = Pipeline(headers.SSE, CoreConfig(**config), None, check=check)
    body = b"".join([*(b for raw in events for b in pipe.feed(raw, 0.0)), *pipe.close()])
    client = encodings.client(fmt, body)
    assert client == encodings.client(fmt, b"".join(events))
    assert sorted(t for t in check.seen.values() if t) == sorted(client.values())
