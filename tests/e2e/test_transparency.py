"""Drop-in means transparent: what an app does around its responses happens as without the middleware.
Real servers on 127.0.0.1 serve ``tests/support/apps_transparency.py``, each test once with the bare app
(the control, which must pass) and once with the middleware added as a user adds it:

1. a background task after a ``StreamingResponse`` SSE stream, FastAPI's ``EventSourceResponse``,
   sse-starlette, and a ``FileResponse`` runs;
2. a FastAPI ``yield`` dependency cleans up after a stream;
3. a long-poll loop checking ``request.is_disconnected()`` notices the client leaving;
4. an endpoint that catches ``ClientDisconnect`` from ``request.body()`` when the client leaves mid-upload
   rolls back, and an outer ``BaseHTTPMiddleware`` finishes its work after ``call_next``;
5. a start the server rejects (a header value with a newline) is the server's to handle: no "failed
   stream" log line from us, no second protocol error, the client sees what it sees without us.

The app marks each piece of work in a file (``TEST_MARKS``); the tests wait for the mark.
"""

from __future__ import annotations

import contextlib
import re
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from ..support.servers import Server, serve

pytestmark = pytest.mark.timeout(120)
APP = "tests.support.apps_transparency:app"
SERVERS = ("uvicorn-httptools", "hypercorn-asyncio", "hypercorn-trio")
MODES = pytest.mark.parametrize("wrap", [False, True], ids=["bare", "wrapped"])
ON = pytest.mark.parametrize("kind", SERVERS)
MARK_SECONDS = 3.0  # the work takes ~10 ms once the response is done

Serving = Callable[[str, bool], Server]


@pytest.fixture(scope="module")
def marks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("marks")


@pytest.fixture(scope="module")
def served(marks: Path) -> Iterator[Serving]:
    """One server per (kind, bare or wrapped), started on first use, stopped with the module."""
    running: dict[tuple[str, bool], Server] = {}
    with contextlib.ExitStack() as stack:

        def get(kind: str, wrap: bool) -> Server:
            if (kind, wrap) not in running:
                env = {"TEST_MARKS": str(marks), "TEST_WRAP": "1" if wrap else "0"}
                running[kind, wrap] = stack.enter_context(serve(kind, APP, env))
            return running[kind, wrap]

        yield get


def appears(path: Path, seconds: float = MARK_SECONDS) -> bool:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def send_and_leave(server: Server, request: bytes, stay: float) -> float:
    """Send raw bytes, stay connected ``stay`` seconds without reading, close; return when it closed."""
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(request)
        time.sleep(stay)
    return time.monotonic()


@ON
@MODES
@pytest.mark.parametrize("endpoint", ["streaming", "native", "sse-starlette", "file"])
def test_background_task_runs_after_the_response(
    served: Serving, marks: Path, kind: str, wrap: bool, endpoint: str
) -> None:
    ident = uuid.uuid4().hex
    response = httpx.get(f"{served(kind, wrap).url}/background/{endpoint}?id={ident}", timeout=30)
    assert response.status_code == 200
    if endpoint == "file":
        assert response.content == Path("tests/support/apps_transparency.py").read_bytes()
    else:
        assert "token 2" in response.text  # the last token arrived: the stream is whole
    assert appears(marks / ident), f"the background task after the {endpoint} response never ran"


@ON
@MODES
def test_yield_dependency_cleans_up_after_a_stream(
    served: Serving, marks: Path, kind: str, wrap: bool
) -> None:
    ident = uuid.uuid4().hex
    response = httpx.get(f"{served(kind, wrap).url}/dependency?id={ident}", timeout=30)
    assert response.status_code == 200 and "token 2" in response.text
    assert appears(marks / ident), "the code after the dependency's yield never ran"


# hypercorn-trio is left out: its receive() always checkpoints, so is_disconnected() (which probes it in
# a cancelled scope) never turns true there, with or without the middleware.
@pytest.mark.parametrize("kind", ["uvicorn-httptools", "hypercorn-asyncio"])
@MODES
def test_long_poll_notices_the_client_leaving(served: Serving, marks: Path, kind: str, wrap: bool) -> None:
    """The endpoint checks ``is_disconnected()`` every 0.1 s for up to 30 s."""
    ident = uuid.uuid4().hex
    request = f"GET /long-poll?id={ident} HTTP/1.1\r\nHost: test\r\n\r\n".encode()
    left = send_and_leave(served(kind, wrap), request, stay=0.5)
    assert appears(marks / ident, 2.0), "the loop did not see the client leave (it polls every 0.1 s)"
    assert time.monotonic() - left < 2.5


def _aborted_upload(path: str, ident: str) -> bytes:
    head = f"POST {path}?id={ident} HTTP/1.1\r\nHost: test\r\nContent-Length: 1000\r\n\r\n"
    return head.encode() + b"x" * 10  # 10 of the 1,000 bytes announced, then the client is gone


@ON
@MODES
@pytest.mark.parametrize("path", ["/upload", "/audited/upload"], ids=["plain", "behind-basehttpmiddleware"])
def test_aborted_upload_is_rolled_back(
    served: Serving, marks: Path, kind: str, wrap: bool, path: str
) -> None:
    """Under ``/audited`` an outer ``BaseHTTPMiddleware`` must also finish its work after ``call_next``."""
    ident = uuid.uuid4().hex
    send_and_leave(served(kind, wrap), _aborted_upload(path, ident), stay=0.3)
    assert appears(marks / ident), "the endpoint's `except ClientDisconnect` rollback never ran"
    if path.startswith("/audited"):
        assert appears(marks / f"after-{ident}"), "the outer middleware's code after call_next never ran"


REJECTION = {  # what each server says when it refuses the header value
    "uvicorn-h11": "h11._util.LocalProtocolError: Illegal header value",
    "uvicorn-httptools": "RuntimeError: Invalid HTTP header value.",
    "hypercorn-asyncio": "h11._util.LocalProtocolError: Illegal header value",
}
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception)\b.*$", re.MULTILINE)


@pytest.mark.parametrize("kind", sorted(REJECTION))
@MODES
def test_a_start_the_server_rejects_is_the_servers_to_handle(served: Serving, kind: str, wrap: bool) -> None:
    server = served(kind, wrap)
    before = len(server.output())
    try:
        seen: object = httpx.get(f"{server.url}/bad-header", timeout=30).status_code
    except httpx.RemoteProtocolError:
        seen = "no response"
    assert seen == ("no response" if kind.startswith("uvicorn") else 500)  # as the bare app gets
    time.sleep(0.3)  # let the server finish its log
    log = server.output()[before:]
    errors = [m.group(0) for m in EXCEPTION_LINE.finditer(log)]
    problems = []
    if len(errors) != 1 or not errors[0].startswith(REJECTION[kind]):
        problems.append(f"the server raised {errors}, not once {REJECTION[kind]!r}")
    if "stream failed" in log:
        problems.append("a failure of the server's own send was logged as a failed stream")
    assert not problems
