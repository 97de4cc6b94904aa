"""The lab as a person sees it: headless Chromium loads the page, runs scenarios and reads the screen.

The three panels are the controls for each other: the same model, the same seed, the same clock; only
the transport differs (buffered JSON, raw SSE, SSE through the middleware). ``LAB_SCREENSHOT=docs/lab.png``
refreshes the screenshot of docs/index.md (Getting started).
Chromium is Debian's (``/usr/bin/chromium``, or ``LAB_CHROMIUM``); missing, it is a failure under
``CI=true`` and a skip elsewhere.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..support.browser import chromium
from ..support.servers import ROOT, example

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

# The manual's picture is refreshed on request (LAB_SCREENSHOT=docs/lab.png); a plain run leaves the
# tree clean and writes to a temporary file, still proving the screenshot can be taken.
SCREENSHOT = Path(os.environ.get("LAB_SCREENSHOT") or Path(tempfile.gettempdir()) / "sse-lab.png")


@pytest.fixture(scope="module")
def lab_url() -> Iterator[str]:
    with example("lab.py") as server:
        yield server.url


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as browser:
        yield browser


@pytest.fixture
def page(browser: Browser, lab_url: str) -> Iterator[Page]:
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(lab_url)
    page.wait_for_selector("body[data-run=ready]")
    yield page
    page.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


# Records any moment a panel showed markup a person should never see: a literal fence or math marker.
WATCH_LITERALS = """() => {
  window.__literals = [];
  const check = () => document.querySelectorAll(".panel").forEach((p) => {
    const text = p.querySelector(".content").innerText;
    if (/```|~~~|\\$\\$/.test(text)) window.__literals.push([p.dataset.panel, text.slice(-80)]);
  });
  new MutationObserver(check).observe(document.getElementById("panels"),
    { subtree: true, childList: true, characterData: true });
}"""


def run_scenario(page: Page, scenario: str, **knobs: float) -> None:
    page.click(f"#scenarios button[data-name={scenario}]")
    for name, value in knobs.items():
        page.fill(f"#{name}", str(value))
    page.evaluate(WATCH_LITERALS)
    page.click("#run")


def wait_finished(page: Page) -> None:
    page.wait_for_selector("body[data-run=finished]", timeout=60_000)


def metric(page: Page, panel: str, name: str) -> str:
    return page.inner_text(f'[data-panel="{panel}"] [data-metric="{name}"]')


def seconds(text: str) -> float:
    match = re.match(r"([\d.]+) s", text)
    assert match, f"not a time: {text!r}"
    return float(match.group(1))


def content(page: Page, panel: str) -> str:
    return page.inner_text(f'[data-panel="{panel}"] .content').strip()


def scrub_to(page: Page, t: float) -> None:
    page.evaluate(
        """(t) => {
      const s = document.getElementById("scrub");
      s.value = Math.round((t / lab.tEnd) * 1000);
      s.dispatchEvent(new Event("input"));
    }""",
        t,
    )


def test_report_streams_first_coalesced_and_replays(page: Page) -> None:
    run_scenario(page, "report", tpot=10)
    page.wait_for_function("document.querySelector('[data-panel=mw] .content').innerText.trim().length > 0")
    first: dict[str, Any] = page.evaluate("""() => Object.fromEntries(["buffered", "mw"].map((id) =>
      [id, document.querySelector(`[data-panel=${id}] .content`).innerText.trim()]))""")
    assert first["mw"], "text is on screen in the middleware panel"
    assert first["buffered"] == "", "while the non-streaming panel still shows nothing"
    wait_finished(page)

    for panel in ("buffered", "raw", "mw"):
        assert page.get_attribute(f'[data-panel="{panel}"]', "data-state") == "done"
    assert content(page, "mw") == content(page, "buffered") == content(page, "raw"), "same answer, three ways"
    tokens = int(metric(page, "mw", "tokens"))
    mw_frames, raw_frames = int(metric(page, "mw", "frames")), int(metric(page, "raw", "frames"))
    assert tokens > 300
    assert mw_frames < tokens / 2, f"coalescing: {mw_frames} frames for {tokens} tokens"
    assert raw_frames > mw_frames, "control: without the middleware, about one frame per token"
    assert seconds(metric(page, "mw", "felt")) * 3 < seconds(metric(page, "buffered", "felt"))
    assert page.evaluate("window.__literals") == [], "no literal ``` or $$ was ever on screen"

    # The scrubber shows any instant again: just after the first token, only the streamed panels have text.
    ttft = page.evaluate("lab.panels.find((p) => p.spec.id === 'mw').s.ttft")
    scrub_to(page, ttft + 0.2)
    assert content(page, "mw") and content(page, "raw") and content(page, "buffered") == ""
    # For the screenshot: the middle of the code block, written while the buffered panel still waits.
    t_code = page.evaluate("""() => {
      const p = lab.panels.find((x) => x.spec.id === "mw");
      const at = p.text.indexOf("first = first or now");
      return p.snaps.find((s) => s.len >= at).t;
    }""")
    scrub_to(page, t_code)
    assert "writing…" in page.inner_text('[data-panel="mw"] .code-head'), "an open fence is code in progress"
    assert content(page, "buffered") == ""
    SCREENSHOT.parent.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOT), full_page=True)


def test_failure_mid_answer_shows_an_error_not_a_hang(page: Page) -> None:
    run_scenario(page, "failure", ttft=0.3, tpot=8)
    wait_finished(page)
    for panel in ("buffered", "raw", "mw"):
        assert page.get_attribute(f'[data-panel="{panel}"]', "data-state") == "error"
    mw_error = page.inner_text('[data-panel="mw"] .error')
    assert "Error event from the server" in mw_error
    assert content(page, "mw"), "the text that arrived before the failure stays on screen"
    raw_error = page.inner_text('[data-panel="raw"] .error')
    assert "Connection dropped" in raw_error, "control: raw, the client gets no explanation"
    assert "HTTP 500" in page.inner_text('[data-panel="buffered"] .error')
    assert page.locator("#log .log-err").filter(has_text='{"error"').count() >= 1


def test_tool_call_silence_shows_heartbeats(page: Page) -> None:
    run_scenario(page, "tool", ttft=0.3, tpot=8)
    wait_finished(page)
    assert int(metric(page, "mw", "heartbeats")) >= 2, "a 4 s silence with a 1 s heartbeat interval"
    assert int(metric(page, "raw", "heartbeats")) == 0, "control: no heartbeats without the middleware"
    assert page.locator("#log .log-hb").filter(has_text=": ping").count() >= 2
    assert page.get_attribute('[data-panel="mw"]', "data-state") == "done"


def test_network_drop_the_middleware_panel_resumes_the_raw_one_loses_the_rest(page: Page) -> None:
    run_scenario(page, "drop", ttft=0.3, tpot=8)
    wait_finished(page)
    whole = content(page, "buffered")
    assert page.get_attribute('[data-panel="mw"]', "data-state") == "done"
    assert content(page, "mw") == whole, "resumed: the whole answer, nothing missing, nothing twice"
    # It was cut mid-answer, and came back with Last-Event-ID.
    at_drop = page.evaluate("""() => {
      const p = lab.panels.find((x) => x.spec.id === "mw");
      const cut = p.marks.find((m) => m.kind === "drop").t;
      return p.snaps.filter((s) => s.t <= cut).pop().len;
    }""")
    assert 0 < at_drop < len(whole) / 2, f"{at_drop} characters of {len(whole)} before the drop"
    assert page.locator("#log .log-resume").filter(has_text="Last-Event-ID").count() == 1
    # Control: the raw stream had no ids to resume from; what it showed before the drop is all it has.
    assert page.get_attribute('[data-panel="raw"]', "data-state") == "error"
    raw = content(page, "raw")
    assert raw and len(raw) < len(whole) / 2
    assert "Connection dropped" in page.inner_text('[data-panel="raw"] .error')


def test_guarded_answer_raw_shows_the_credential_the_middleware_ends_at_the_filter(page: Page) -> None:
    run_scenario(page, "guarded", ttft=0.3, tpot=8)
    wait_finished(page)
    assert "sk-live-" in content(page, "raw") and "sk-live-" in content(page, "buffered")  # the controls
    assert page.get_attribute('[data-panel="raw"]', "data-state") == "done"
    mine = content(page, "mw")
    assert mine and "sk-" not in mine, "the text before the filter, and nothing of the key"
    # A guard doing its job reads as stopped, not failed (the format's own content-filter ending).
    assert page.get_attribute('[data-panel="mw"]', "data-state") == "stopped"
    assert page.inner_text('[data-panel="mw"] .status').lower() == "stopped"
    box = page.inner_text('[data-panel="mw"] .error')
    assert "Stopped by a guard" in box and "credential" in box
    assert page.locator("#log .log-err").filter(has_text="content_filter").count() == 1


def test_recovery_shows_the_whole_answer_counted_as_shown(page: Page) -> None:
    """The re-run's note is logged, not counted as a ping; the tokens are the whole answer's (as the lab's
    model counts them), and the billed usage that differs is said for what it is."""
    answer = lab_model().SCENARIOS["recover"].answer
    run_scenario(page, "recover", ttft=0.3, tpot=8)
    wait_finished(page)
    assert page.get_attribute('[data-panel="mw"]', "data-state") == "done"
    assert page.evaluate("lab.panels.find((p) => p.spec.id === 'mw').text") == answer, (
        "whole, across the re-run"
    )
    assert int(metric(page, "mw", "tokens")) == len(lab_model().tokenize(answer))
    assert page.locator("#log .log-note").filter(has_text="re-run 1").count() == 1
    assert page.locator("#log .log-hb").filter(has_text="re-run").count() == 0
    pings = page.locator("#log .log-hb").filter(has_text=": ping").count()
    assert int(metric(page, "mw", "heartbeats")) == pings, "the ping count is the pings alone"
    billed = page.locator("#log .log-note").filter(has_text="tokens billed")
    assert billed.count() == 1 and "a failed one's estimated" in billed.inner_text()
    # Control: raw, the same failure leaves half an answer and a broken connection.
    assert page.get_attribute('[data-panel="raw"]', "data-state") == "error"
    assert len(content(page, "raw")) < len(content(page, "mw"))


def lab_model() -> Any:
    """examples/lab_model.py, the lab's simulated model, as the lab imports it."""
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        return importlib.import_module("lab_model")
    finally:
        sys.path.remove(str(ROOT / "examples"))


def test_panel_headers_keep_the_metric_rows_in_line_and_a_stop_is_not_a_failure(page: Page) -> None:
    """Subtitles of different lengths (the middleware's wraps) leave every panel's metric row at the
    same height; a guard's stop is boxed amber as its badge, a failure red (the control)."""
    rows = "() => [...document.querySelectorAll('.panel .metrics')].map((m) => m.getBoundingClientRect().top)"
    for width in (1500, 1180):  # at 1180 the panels are narrow and the middleware's subtitle wraps
        page.set_viewport_size({"width": width, "height": 1100})
        tops = page.evaluate(rows)
        assert len(tops) == 3 and max(tops) - min(tops) < 1, (width, tops)
        cut = page.evaluate(
            "() => [...document.querySelectorAll('.metrics')].some((m) => m.scrollWidth > m.clientWidth)"
        )
        assert not cut, f"a metric row overflows its panel at {width} px"
    box_color = "(sel) => getComputedStyle(document.querySelector(sel)).backgroundColor"
    run_scenario(page, "guarded", ttft=0.3, tpot=8)
    wait_finished(page)
    stopped = page.evaluate(box_color, '[data-panel="mw"] .error')
    badge = page.evaluate(box_color, '[data-panel="mw"] .status')
    run_scenario(page, "failure", ttft=0.3, tpot=8)
    wait_finished(page)
    failed = page.evaluate(box_color, '[data-panel="mw"] .error')
    assert stopped != failed, "a stop is not boxed as a failure"
    assert _hue(stopped) == _hue(badge), f"boxed in its badge's colour: {stopped} vs {badge}"


def _hue(css: str) -> str:
    """Which of red, amber or another colour an rgb() string is, by its channels' order."""
    r, g, b = (int(v) for v in re.findall(r"\d+", css)[:3])
    return "red" if r > g and b > g else "amber" if r > g > b else "other"
