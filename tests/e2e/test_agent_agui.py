"""AG-UI end to end: pydantic-ai's ``AGUIAdapter`` (tests/support/apps_agui.py, a scripted model at 100
tokens per second) behind the middleware, read by the protocol's official client (``@ag-ui/client``'s
``HttpAgent``, in node) and by its Python models (``ag_ui.core``). Every test has the bare app as its
control: the same readers, the same prompts, without the middleware.

What a user sees (each assistant message's text, each tool call's name and arguments, tool results,
the run's error message) must be the same both ways, carried by fewer events through the middleware;
failures must end the run the protocol's way (``RUN_ERROR``), never as a parse failure or a cut stream.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import pytest

from ..support.agui_readers import READERS, Run
from ..support.apps_agui import ANSWER, GOOD_CARD, GUARDED, TOOL_ARGS
from ..support.servers import Server, example, served_and_bare, uvicorn

APP = "tests.support.apps_agui:app"
ours, bare = served_and_bare(APP)
Reader = Callable[[str, str], Run]


@pytest.fixture(scope="module")
def guarded() -> Iterator[Server]:
    """The middleware with a guard that blocks the word ``forbidden``."""
    with uvicorn(APP, {"TEST_AGUI_GUARD": "1"}) as server:
        yield server


@pytest.fixture(scope="module")
def checked() -> Iterator[Server]:
    """The middleware with the output check on: tool arguments against the tool's ``parameters``."""
    with uvicorn(APP, {"SSE_MIDDLEWARE_VALIDATE_JSON": "1"}) as server:
        yield server


@pytest.fixture(params=sorted(READERS))
def read(request: pytest.FixtureRequest) -> Reader:
    return READERS[request.param]


def test_the_same_answer_with_fewer_events(ours: Server, bare: Server, read: Reader) -> None:
    want = read(f"{bare.url}/agui", "text")
    assert want.failed is None and want.error is None
    assert want.texts == ["".join(ANSWER)]  # the control: code fence, CJK and a ZWJ emoji, whole
    assert want.types.count("TEXT_MESSAGE_CONTENT") == len(ANSWER)  # one event per token
    got = read(f"{ours.url}/agui", "text")
    assert got.failed is None and got.error is None
    assert got.same_content() == want.same_content()
    assert got.types[0] == "RUN_STARTED" and got.types[-1] == "RUN_FINISHED"
    assert got.events < want.events, f"{got.events} events through the middleware, {want.events} bare"


def test_the_same_tool_call_and_answer_with_fewer_events(ours: Server, bare: Server, read: Reader) -> None:
    want = read(f"{bare.url}/agui", "tool")
    assert want.calls == [("lookup", "".join(TOOL_ARGS))]  # streamed in pieces, whole at the end
    assert want.results == ["sunny (weather in Paris)"]
    assert want.texts == ["The tool said: sunny (weather in Paris)."]
    got = read(f"{ours.url}/agui", "tool")
    assert got.failed is None and got.error is None
    assert got.same_content() == want.same_content()
    assert got.types.count("TOOL_CALL_ARGS") < want.types.count("TOOL_CALL_ARGS") == len(TOOL_ARGS)


def test_a_frontend_tool_call_is_the_same(ours: Server, bare: Server, read: Reader) -> None:
    want, got = read(f"{bare.url}/agui", "frontend ok"), read(f"{ours.url}/agui", "frontend ok")
    assert want.calls == [("show_card", "".join(GOOD_CARD))] and want.types[-1] == "RUN_FINISHED"
    assert got.same_content() == want.same_content() and got.types[-1] == "RUN_FINISHED"


def test_the_apps_own_run_error_reaches_the_client_as_sent(ours: Server, bare: Server, read: Reader) -> None:
    """pydantic-ai ends a failing run with its own RUN_ERROR: the middleware passes it on."""
    want = read(f"{bare.url}/agui", "fail")
    assert want.error is not None and want.error["message"] == "the model failed mid-answer"
    assert want.texts == ["".join(ANSWER[:12])] and want.failed is None
    got = read(f"{ours.url}/agui", "fail")
    assert got.failed is None
    assert got.same_content() == want.same_content()
    assert got.types[-1] == "RUN_ERROR"


def test_an_exception_mid_run_reaches_the_client_as_run_error(
    ours: Server, bare: Server, read: Reader
) -> None:
    """A hand-written producer whose generator raises after the start: without the middleware the client
    sees a cut connection; with it, the run ends with RUN_ERROR (the AG-UI way), the text so far kept."""
    want = read(f"{bare.url}/crash", "crash")
    assert want.error is None and want.failed is not None  # the control: a failure, not a run error
    got = read(f"{ours.url}/crash", "crash")
    # No parse or verification failure in the official client: its verifier takes a RUN_ERROR with the
    # message still open (AG-UI requires nothing closed first), and the run reports the error.
    assert got.failed is None, got.failed
    assert got.error is not None and got.types[-1] == "RUN_ERROR"
    assert got.error["code"] == "internal_error"
    assert re.search(r"\(error id: [0-9a-f]{32}\)", got.error["message"]), "our error id, for the logs"
    assert "hunter2" not in repr(got.error), "an unexpected exception's own text never reaches clients"
    assert got.texts == want.texts == ["".join(ANSWER[:10])]


def test_an_exception_after_the_run_finished_adds_nothing(ours: Server, bare: Server, read: Reader) -> None:
    """The producer raises after its ``RUN_FINISHED`` (a cleanup that fails once the run is over): the
    run is whole, and a ``RUN_ERROR`` after it would turn it into a failed one for both readers. The
    middleware logs the exception and ends the stream cleanly. Control: the bare app's cut connection
    fails the run. Mutation: ``Pipeline.answered`` returning False -> our RUN_ERROR after RUN_FINISHED,
    reported as the run's error."""
    want = read(f"{bare.url}/crash", "after the end")
    assert want.types[-1] == "RUN_FINISHED" and want.texts == ["".join(ANSWER[:10])]
    assert want.failed is not None  # the control: the connection is cut after the run finished
    got = read(f"{ours.url}/crash", "after the end")
    assert got.failed is None and got.error is None, (got.failed, got.error)
    assert got.types[-1] == "RUN_FINISHED" and got.texts == want.texts


def test_a_guard_trip_ends_the_run_the_protocols_way(guarded: Server, bare: Server, read: Reader) -> None:
    want = read(f"{bare.url}/agui", "guard")
    assert want.texts == ["".join(GUARDED)] and want.types[-1] == "RUN_FINISHED"  # the control: unguarded
    got = read(f"{guarded.url}/agui", "guard")
    assert got.failed is None, got.failed
    assert got.error is not None and got.error["code"] == "content_filter"
    assert got.types[-1] == "RUN_ERROR"
    assert not any("forbidden" in text for text in got.texts)
    assert got.texts and "".join(GUARDED).startswith(got.texts[0])


def test_a_bad_tool_argument_ends_the_run_the_protocols_way(
    checked: Server, bare: Server, read: Reader
) -> None:
    want = read(f"{bare.url}/agui", "frontend bad")
    assert want.calls == [("show_card", '{"title": 5, "stars": "many"}')]  # the control: it goes through
    assert want.types[-1] == "RUN_FINISHED"
    got = read(f"{checked.url}/agui", "frontend bad")
    assert got.failed is None, got.failed
    assert got.error is not None and got.error["code"] == "json_schema"
    assert got.types[-1] == "RUN_ERROR"
    # Control on the same server: arguments that fit the schema pass the check.
    fine = read(f"{checked.url}/agui", "frontend ok")
    assert fine.error is None and fine.calls == [("show_card", "".join(GOOD_CARD))]


def test_the_example_runs_pydantic_ai_behind_the_middleware(read: Reader) -> None:
    with example("agui.py") as server:
        run = read(f"{server.url}/agui", "What does the middleware do to AG-UI?")
    assert run.failed is None and run.error is None
    assert run.texts and run.texts[0].strip()
    assert run.types[0] == "RUN_STARTED" and run.types[-1] == "RUN_FINISHED"
