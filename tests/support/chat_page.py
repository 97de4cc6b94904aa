"""The AI SDK's React hook, ``useChat``, in a page in headless Chromium: tests/e2e/node/chat_page.jsx,
bundled with esbuild (React, ``@ai-sdk/react``, ``ai``: the versions tests/e2e/node's package-lock.json
pins) into a temp dir when a test first asks for it. The page is served on the origin of the server under
test by Playwright's request routing, so the hook's own requests go to that server, same origin, and the
app stays as it is."""

from __future__ import annotations

import functools
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from .node import NODE_DIR, require_installed

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Response, Route

PAGE = "/__chat_page/"  # no app route starts so: what the page asks for here never reaches the server
HTML = b'<!doctype html><meta charset="utf-8"><div id="root"></div><script src="chat.js"></script>'
# Ended: the hook went back to "ready", or to "error", after it had left "ready" (a request made).
ENDED = """() => { const s = window.__statuses || [];
    return s.length > 1 && (s[s.length - 1] === "ready" || s[s.length - 1] === "error"); }"""


@functools.cache
def script() -> bytes:
    """The page's bundle (esbuild, production React), built once per test process."""
    esbuild = require_installed("esbuild").parent / ".bin" / "esbuild"
    require_installed("@ai-sdk/react")
    with tempfile.TemporaryDirectory(prefix="chat-page-") as tmp:
        out = Path(tmp) / "chat.js"
        subprocess.run(
            [str(esbuild), "chat_page.jsx", "--bundle", "--format=iife", "--jsx=automatic",
             "--define:process.env.NODE_ENV=\"production\"", f"--outfile={out}", "--log-level=warning"],
            cwd=NODE_DIR, check=True, timeout=120,
        )  # fmt: skip
        return out.read_bytes()


class ChatPage:
    """One tab whose origin is ``origin``; ``responses`` records every response the page got (its
    method, URL and headers) as Chromium saw it, the hook's own fetches included."""

    def __init__(self, browser: Browser, origin: str) -> None:
        self.origin = origin
        self.page = browser.new_page()
        self.responses: list[dict[str, Any]] = []
        self.page.route(lambda url: url.startswith(origin + PAGE), self._serve)
        self.page.on("response", self._record)

    def _serve(self, route: Route) -> None:
        if route.request.url.split("?")[0].endswith("chat.js"):
            route.fulfill(body=script(), content_type="text/javascript")
        else:
            route.fulfill(body=HTML, content_type="text/html")

    def _record(self, response: Response) -> None:
        entry = {"method": response.request.method, "url": response.url, "status": response.status}
        self.responses.append({**entry, "headers": response.headers})

    def open(self, **query: str) -> None:
        """Load the page (a reload too: the hook starts afresh) with ``query`` (see chat_page.jsx)."""
        self.page.goto(self.origin + PAGE + "chat.html?" + urlencode(query))
        self.page.wait_for_function("() => window.__chat !== undefined", timeout=30_000)

    def send(self, text: str) -> None:
        """The hook's ``sendMessage``, not waited for (its promise ends with the answer)."""
        self.page.evaluate("text => { window.__send(text); }", text)

    def state(self) -> dict[str, Any]:
        """The hook's state as of its last render: ``status``, ``messages``, ``error``; and ``statuses``,
        every status it had since the page loaded, in order."""
        state: dict[str, Any] = self.page.evaluate("() => ({...window.__chat, statuses: window.__statuses})")
        return state

    def wait(self, condition: str = ENDED, timeout: float = 60) -> dict[str, Any]:
        """The state once the JS ``condition`` holds (by default: the hook's request ended)."""
        self.page.wait_for_function(condition, timeout=timeout * 1000)
        return self.state()


def answer(state: dict[str, Any]) -> str:
    """The text of the assistant's message (the last one) in the hook's state; "" when there is none."""
    mine = [m for m in state["messages"] if m["role"] == "assistant"]
    return "".join(p["text"] for p in mine[-1]["parts"] if p["type"] == "text") if mine else ""
