"""Settings as keywords (``add_middleware(StreamingMiddleware, heartbeat_interval=5)``, as every Starlette
middleware takes its options), a misspelt name told its nearest known one, and a bad setting refusing the
lifespan's startup rather than raising where Starlette builds its middleware (in its first call, the
lifespan's). The server side of that refusal, ``uvicorn app:app`` exiting, is tests/e2e/test_bad_settings.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import sys
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from sse_middleware import ConfigError, StreamingMiddleware, StreamingSettings

from ..support.harness import Wire, scope

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

pytestmark = [pytest.mark.usefixtures("restore_signals"), pytest.mark.timeout(30)]


async def hello(request: Any) -> PlainTextResponse:
    return PlainTextResponse(f"hello {request.state.started}")


def starlette_app(log: list[str], **options: Any) -> Starlette:
    async def lifespan(app: Starlette) -> Any:
        log.append("startup")
        yield {"started": "yes"}
        log.append("shutdown")

    app = Starlette(routes=[Route("/", hello)], lifespan=contextlib.asynccontextmanager(lifespan))
    app.add_middleware(StreamingMiddleware, **options)
    return app


async def refused(app: Any) -> BaseException:
    """What a lifespan's startup raised (asgi-lifespan reads no ``startup.failed``: the raise after it)."""
    with pytest.raises(BaseException) as info:
        async with LifespanManager(app):
            pass
    failure = info.value
    while isinstance(failure, BaseExceptionGroup):  # trio's task group wraps it
        (failure,) = failure.exceptions
    return failure


def test_keywords_are_the_settings_fields_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSE_MIDDLEWARE_DIALECT", "openai")
    mw = StreamingMiddleware(hello, heartbeat_interval=5, coalesce=False)  # type: ignore[arg-type]
    assert (mw.settings.heartbeat_interval, mw.settings.coalesce, mw.settings.dialect) == (5, False, "openai")
    # Control: settings= alone is taken as given, the environment unread.
    given = StreamingSettings(heartbeat_interval=7)
    assert StreamingMiddleware(hello, given).settings is given  # type: ignore[arg-type]
    assert StreamingMiddleware(hello, settings=given).settings is given  # type: ignore[arg-type]


def test_every_field_is_a_keyword_and_none_shadows_a_parameter() -> None:
    """Derived from the dataclass: a field added to StreamingSettings is a keyword with no edit here."""
    defaults = StreamingSettings()
    own = set(inspect.signature(StreamingMiddleware).parameters) - {"changes"}
    for field in dataclasses.fields(StreamingSettings):
        assert field.name not in own
        mw = StreamingMiddleware(hello, **{field.name: getattr(defaults, field.name)})  # type: ignore[arg-type]
        assert mw.settings == defaults, field.name


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"heartbeat_intervl": 5}, "unknown setting(s) heartbeat_intervl (did you mean heartbeat_interval?)"),
        ({"send_timeout": -1}, "send_timeout must be a finite number >= 0, got -1"),
        ({"settings": StreamingSettings(), "coalesce": False}, "settings= and setting keywords (coalesce)"),
        ({"settings": {"coalesce": False}}, "settings must be a StreamingSettings, got dict"),
        ({"guards": ["not a function"]}, "guard"),
    ],
)
@pytest.mark.anyio
async def test_a_bad_setting_refuses_the_startup_and_every_request(
    anyio_backend: str, options: dict[str, Any], says: str
) -> None:
    log: list[str] = []
    app = starlette_app(log, **options)
    failure = await refused(app)
    assert isinstance(failure, (ConfigError, TypeError)) and says in str(failure)
    assert log == []  # the app's own startup never ran
    wire = Wire()
    with pytest.raises((ConfigError, TypeError)) as raised:
        await app.middleware_stack(scope(), wire.receive, wire.send)  # type: ignore[misc]
    assert says in str(raised.value)


@pytest.mark.anyio
async def test_a_middleware_wrapped_by_hand_refuses_too(
    anyio_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``app = StreamingMiddleware(app)`` at import, with a bad environment: the same refusal."""
    monkeypatch.setenv("SSE_MIDDLEWARE_HEARTBEAT_INTERVAL", "fast")
    log: list[str] = []
    app = StreamingMiddleware(starlette_app(log, settings=StreamingSettings()))
    failure = await refused(app)
    assert "SSE_MIDDLEWARE_HEARTBEAT_INTERVAL='fast' is not valid" in str(failure)
    assert log == []


@pytest.mark.anyio
async def test_good_keywords_pass_the_apps_lifespan_through(anyio_backend: str) -> None:
    """The control: the same app with a good keyword starts, serves from its lifespan's state, stops."""
    log: list[str] = []
    app = starlette_app(log, heartbeat_interval=5)
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            assert (await client.get("/")).text == "hello yes"
    assert log == ["startup", "shutdown"]


@pytest.mark.anyio
async def test_an_app_without_lifespan_support_is_still_passed_the_lifespan(anyio_backend: str) -> None:
    """Good settings refuse nothing: the app's own answer to the lifespan (here, raising as apps without
    lifespan support do, which servers take for "unsupported") comes through as without us."""

    async def http_only(scope: Any, receive: Any, send: Any) -> None:
        assert scope["type"] == "http", "lifespan unsupported"
        await PlainTextResponse("plain")(scope, receive, send)

    async def no_op_send(message: Any) -> None:  # pragma: no cover - never reached
        raise AssertionError(message)

    async def startup() -> dict[str, str]:
        return {"type": "lifespan.startup"}

    for app in (http_only, StreamingMiddleware(http_only, heartbeat_interval=5)):
        with pytest.raises(AssertionError, match="lifespan unsupported"):
            await app({"type": "lifespan", "asgi": {"version": "3.0"}}, startup, no_op_send)
        wire = Wire()
        await app(scope(), wire.receive, wire.send)
        assert wire.data == b"plain"


def test_a_misspelt_variable_is_told_its_nearest_name_only() -> None:
    with pytest.raises(ConfigError) as info:
        StreamingSettings.from_env({"SSE_MIDDLEWARE_RECOVER_ATTEMPS": "3"})
    assert str(info.value) == (
        "unknown setting(s) SSE_MIDDLEWARE_RECOVER_ATTEMPS (did you mean SSE_MIDDLEWARE_RECOVER_ATTEMPTS?)"
    )
    with pytest.raises(ConfigError) as far:  # nothing near: the name alone, not a list of all
        StreamingSettings.from_env({"SSE_MIDDLEWARE_ZZZ": "3"})
    assert str(far.value) == "unknown setting(s) SSE_MIDDLEWARE_ZZZ"
