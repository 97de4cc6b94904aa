"""The foundation through real uvicorn and a real nginx: stream detection, anti-buffering headers,
untouched pass-through, GZip in either order. Each behaviour is shown against a control."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from sse_middleware._core.sse import Event, parse

from ..support.clients import read_stream
from ..support.servers import Server, nginx, uvicorn

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def wrapped() -> Iterator[Server]:
    with uvicorn("tests.support.apps:app", {"SSE_MIDDLEWARE_COALESCE": "0"}) as server:
        yield server


@pytest.fixture(scope="module")
def control() -> Iterator[Server]:
    with uvicorn("tests.support.apps:app", {"TEST_WRAP": "0"}) as server:
        yield server


def test_stream_gets_anti_buffering_headers(wrapped: Server, control: Server) -> None:
    seen = read_stream(wrapped.url + "/sse?n=3")
    assert seen.headers["x-accel-buffering"] == "no"
    assert seen.headers["cache-control"] == "no-cache, no-transform"
    assert "content-length" not in seen.headers and "connection" not in seen.headers
    assert seen.events == [Event(f"tick {i}", id=str(i)) for i in range(3)]
    bare = read_stream(control.url + "/sse?n=3")
    assert "x-accel-buffering" not in bare.headers  # the control: the headers are ours
    assert bare.body == seen.body  # generic SSE: byte-identical


def test_app_cache_control_kept_and_gains_no_transform(wrapped: Server) -> None:
    seen = read_stream(wrapped.url + "/sse?n=1&cc=private, max-age=0")
    assert seen.headers["cache-control"] == "private, max-age=0, no-transform"


@pytest.mark.parametrize("path", ["/json", "/sized"])
def test_non_streams_pass_through_untouched(wrapped: Server, control: Server, path: str) -> None:
    with httpx.Client() as client:
        ours, theirs = client.get(wrapped.url + path), client.get(control.url + path)
    assert ours.content == theirs.content

    def same(r: httpx.Response) -> list[tuple[str, str]]:
        return sorted((k, v) for k, v in r.headers.multi_items() if k != "date")

    assert same(ours) == same(theirs)
    assert "x-accel-buffering" not in ours.headers


def test_text_plain_stream_detected_and_opt_out_respected(wrapped: Server) -> None:
    plain = read_stream(wrapped.url + "/plain?n=3")
    assert plain.headers["x-accel-buffering"] == "no"
    assert plain.body == b"line 0\nline 1\nline 2\n"
    opted = read_stream(wrapped.url + "/optout?n=2")
    assert "x-accel-buffering" not in opted.headers
    assert opted.events == [Event("tick 0", id="0"), Event("tick 1", id="1")]


@pytest.mark.parametrize("path", ["/native?n=3", "/sse_starlette?n=3"])
def test_peer_sse_responses_get_headers_and_events_unchanged(
    wrapped: Server, control: Server, path: str
) -> None:
    ours, theirs = read_stream(wrapped.url + path), read_stream(control.url + path)
    assert ours.headers["x-accel-buffering"] == "no"
    assert [e.data for e in ours.events] == [e.data for e in theirs.events] != []


# -- nginx ---------------------------------------------------------------------------------------------

SLOW = "/sse?n=5&delay=0.5"  # about 2.5 s in all


@pytest.mark.parametrize("gzip", [True, False], ids=["gzip", "plain"])
def test_nginx_delivers_the_first_event_at_once(wrapped: Server, gzip: bool) -> None:
    with nginx(wrapped.port, gzip=gzip) as proxy:
        seen = read_stream(proxy + SLOW)
    assert seen.events == [Event(f"tick {i}", id=str(i)) for i in range(5)]
    assert seen.first() < 1.0 < seen.total  # the first event long before the end


def test_nginx_default_buffering_passes_a_slow_stream_without_any_header(control: Server) -> None:
    """docs/streams.md's claim about plain nginx, shown without the middleware (no X-Accel-Buffering):
    with its default ``proxy_buffering on`` it still delivers the first event at once. The gzip test below
    shows the same measure does see a held stream."""
    with nginx(control.port, gzip=False) as proxy:
        seen = read_stream(proxy + SLOW)
    assert "x-accel-buffering" not in seen.headers
    assert seen.events == [Event(f"tick {i}", id=str(i)) for i in range(5)]
    assert seen.first() < 1.0 < seen.total


def test_nginx_with_gzip_holds_the_stream_without_the_middleware(control: Server) -> None:
    """The control for the test above: the buffering the middleware removes is real."""
    with nginx(control.port, gzip=True) as proxy:
        seen = read_stream(proxy + SLOW)
    assert len(seen.events) == 5
    assert seen.first() > seen.total - 0.5  # everything arrived at the end


# -- Starlette's GZipMiddleware, in either order ---------------------------------------------------------


@pytest.mark.parametrize("order", ["inner", "outer"])
def test_gzip_middleware_never_holds_an_event_stream(order: str) -> None:
    with uvicorn("tests.support.apps:app", {"TEST_GZIP": order, "SSE_MIDDLEWARE_COALESCE": "0"}) as server:
        seen = read_stream(server.url + SLOW, headers={"accept-encoding": "gzip"})
    assert "content-encoding" not in seen.headers
    assert seen.headers["x-accel-buffering"] == "no"
    assert len(seen.events) == 5 and seen.first() < 1.0 < seen.total


@pytest.mark.parametrize("order", ["inner", "outer"])
def test_gzip_middleware_and_text_plain_streams(order: str) -> None:
    """Starlette's GZip compresses text/plain streams with a sync flush per chunk: still streamed, and
    our middleware leaves the compressed bytes alone (it never merges what it cannot read)."""
    with uvicorn("tests.support.apps:app", {"TEST_GZIP": order}) as server:
        seen = read_stream(server.url + "/plain?n=5&delay=0.5", headers={"accept-encoding": "gzip"})
    assert seen.headers["content-encoding"] == "gzip"
    assert seen.headers["x-accel-buffering"] == "no"
    assert seen.body == b"".join(b"line %d\n" % i for i in range(5))
    assert seen.reads[0][0] < 1.0 < seen.total


def test_parse_of_wire_matches_events(wrapped: Server) -> None:
    seen = read_stream(wrapped.url + "/sse?n=4")
    assert parse(seen.body) == seen.events


def _logged(server: Server, text: str, within: float = 10.0) -> bool:
    """Whether the server logs ``text`` soon: it may log an app's exception after the 500 went out."""
    end = time.monotonic() + within
    while text not in server.output() and time.monotonic() < end:
        time.sleep(0.02)
    return text in server.output()


def test_a_bad_per_request_override_fails_before_any_byte_is_sent(wrapped: Server, control: Server) -> None:
    with httpx.Client() as client:  # the good request first: the server closes a connection an app failed on
        good = client.get(wrapped.url + "/sse?n=2")
        ours = client.get(wrapped.url + "/bad_override?n=2")
        theirs = client.get(control.url + "/bad_override?n=2")
    assert ours.status_code == 500 and _logged(wrapped, "heartbeat_interval must be")
    # override() itself checks, so the route fails at the call, with or without the middleware.
    assert theirs.status_code == 500 and _logged(control, "heartbeat_interval must be")
    assert good.status_code == 200  # the control: the same stream without the bad override
