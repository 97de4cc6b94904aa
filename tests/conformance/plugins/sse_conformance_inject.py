"""pytest plugin (``-p sse_conformance_inject``): put ``StreamingMiddleware``, with its default settings
from the environment, into every app an ecosystem test suite builds, the way a user would.

- **Starlette and FastAPI apps** get it as ``app.add_middleware(StreamingMiddleware)`` written right after
  the app is made: inside Starlette's ``ServerErrorMiddleware`` (and FastAPI's own outer layers), outside
  ``ExceptionMiddleware`` and the router, outside the middleware given to the constructor, inside any the
  test adds later with ``add_middleware``. It is spliced in when the app builds its stack, so
  ``app.user_middleware`` stays as the test made it.
- **Raw ASGI apps** (a function, a ``Router``, a test's own wrapper) handed to Starlette's ``TestClient``
  or to ``httpx``/``httpx2``'s ``ASGITransport`` are wrapped whole, as a user of a bare ASGI app would.
- **Never twice on one request**: a mounted sub-app, or a Starlette app inside a wrapped raw app, builds
  its own stack with the middleware in it. A context variable set while a request is inside an injected
  layer makes any nested one pass the request straight through, so each request sees exactly one
  middleware, the outermost. (The scope is left untouched: suites assert on it.)

Responses tests call directly (``await response(scope, receive, send)``) build no app and are not wrapped.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware

from sse_middleware import StreamingMiddleware

_inside = contextvars.ContextVar("sse_conformance_inside", default=False)


class Injected:
    """``StreamingMiddleware`` around ``app``, unless the request already went through one."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.streaming = StreamingMiddleware(app)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if _inside.get():
            await self.app(scope, receive, send)
            return
        token = _inside.set(True)
        try:
            await self.streaming(scope, receive, send)
        finally:
            _inside.reset(token)


def _wrap_raw(app: Any) -> Any:
    return app if isinstance(app, (Starlette, Injected, StreamingMiddleware)) else Injected(app)


def _counting_add_middleware(original: Callable[..., None]) -> Callable[..., None]:
    def add_middleware(self: Starlette, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self.__dict__["_sse_added"] = self.__dict__.get("_sse_added", 0) + 1

    return add_middleware


def _splicing_build(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def build_middleware_stack(self: Any) -> Any:
        if self.__dict__.get("_sse_building"):  # a subclass calling super(): spliced once already
            return original(self)
        saved = self.user_middleware
        at = min(self.__dict__.get("_sse_added", 0), len(saved))  # add_middleware() inserts at 0
        self.user_middleware = [*saved[:at], Middleware(Injected), *saved[at:]]
        self.__dict__["_sse_building"] = True
        try:
            return original(self)
        finally:
            self.user_middleware = saved
            del self.__dict__["_sse_building"]

    return build_middleware_stack


def _wrapping_init(original: Callable[..., None], *, transport: bool) -> Callable[..., None]:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        wrapped = _wrap_raw(self.app)
        if wrapped is not self.app:
            self.app = wrapped
            if transport:  # TestClient hands its app to its transport in __init__
                self._transport.app = wrapped

    return __init__


def _install() -> None:
    Starlette.add_middleware = _counting_add_middleware(Starlette.add_middleware)  # type: ignore[method-assign]
    classes: list[type] = [Starlette]
    try:
        from fastapi import FastAPI
    except ImportError:
        pass
    else:
        classes.append(FastAPI)  # it has its own build_middleware_stack
    for cls in classes:
        if "build_middleware_stack" in cls.__dict__:
            cls.build_middleware_stack = _splicing_build(cls.__dict__["build_middleware_stack"])  # type: ignore[attr-defined]

    from starlette.testclient import TestClient

    TestClient.__init__ = _wrapping_init(TestClient.__init__, transport=True)  # type: ignore[method-assign]
    for name in ("httpx", "httpx2"):
        try:
            module = __import__(name)
        except ImportError:
            continue
        module.ASGITransport.__init__ = _wrapping_init(module.ASGITransport.__init__, transport=False)


_install()
