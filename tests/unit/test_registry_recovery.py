"""Recovery, part of the format: each dialect class names its mid-stream recovery (``Dialect.recovery``: a
transcript of what the client has, its splicer, its request's shape), or says why it has none; the code
that runs recovery (``_core/recovery/``) finds it through the class and names no format. A new format is
one class, its recovery included: shown with a format made here, whose stream is recovered, its re-run's
body written in its shape, with no line of recovery's code changed. The controls: a class that says
nothing (or None without why) is found, a probe that branches on a format's name is found, and a format
whose class names no recovery is never recovered.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from sse_middleware._core.dialects import BY_NAME, FORMATS, Dialect, base, registry
from sse_middleware._core.dialects.base import First
from sse_middleware._core.dialects.recovery.base import Splicer, Transcript
from sse_middleware._core.dialects.recovery.common import Failure, Read, write
from sse_middleware._core.dialects.recovery.request import Prefilled, dump_body
from sse_middleware._core.recovery import GiveUp, Recoverer, Retry, prefill
from sse_middleware._core.sse import parse

from .test_registry import COMPLETE

RECOVERED = {"openai", "anthropic", "openai-responses", "ai-sdk"}  # written out: the classes must agree
RECOVERY_CODE = Path(base.__file__).parents[1] / "recovery"  # _core/recovery/: runs recovery, knows no format


def _declared(cls: type) -> tuple[bool, str | None]:
    """Whether a class's own body assigns ``recovery``; for ``recovery = None``, the docstring after it."""
    (node,) = ast.parse(textwrap.dedent(inspect.getsource(cls))).body
    assert isinstance(node, ast.ClassDef)
    for i, stmt in enumerate(node.body):
        if isinstance(stmt, ast.Assign) and any(getattr(t, "id", None) == "recovery" for t in stmt.targets):
            after = node.body[i + 1] if i + 1 < len(node.body) else None
            doc = (
                after.value.value
                if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                else None
            )
            return True, doc if isinstance(doc, str) and doc.strip() else None
    return False, None


class _Silent(Dialect):
    name = "silent"


class _Unexplained(Dialect):
    name = "unexplained"
    recovery = None


def test_every_format_declares_its_recovery_or_why_it_has_none() -> None:
    for cls in FORMATS:
        declared, why = _declared(cls)
        assert declared, f"{cls.__name__} does not say whether its streams are recovered"
        if cls.recovery is None:
            assert why, f"{cls.__name__}: recovery = None, and no docstring says why"
        else:  # a transcript of its own, beside its reading: the module of the same name under recovery/
            assert issubclass(cls.recovery, Transcript) and cls.recovery is not Transcript
            assert cls.recovery.__module__ == cls.__module__.replace(".dialects.", ".dialects.recovery.")
    assert {cls.name for cls in FORMATS if cls.recovery is not None} == RECOVERED
    # The control: a class that says nothing, and one that says None without why, are both found.
    assert _declared(_Silent) == (False, None) and _declared(_Unexplained) == (True, None)


def _kind(transcript: Transcript | None) -> type[Transcript] | None:
    return type(transcript) if transcript is not None else None


def test_recovery_reads_a_stream_through_its_dialect_class() -> None:
    """Named by the settings or detected from its first event, a stream's transcript is the one its
    format's class names; a format that names none is never recovered."""
    for cls in FORMATS:
        assert _kind(Recoverer("continue", 1, 0.0, dialect=cls.name).transcript) is cls.recovery, cls
    for name, stream in COMPLETE.items():
        detected = Recoverer("continue", 1, 0.0)
        detected.feed(stream.encode())
        assert _kind(detected.transcript) is BY_NAME[name].recovery, name
    given_up = Recoverer("continue", 1, 0.0, dialect="ag-ui").fail(Failure("exception"))
    assert isinstance(given_up, GiveUp) and given_up.why == "not recoverable: format ag-ui"  # the control


def _format_names_in(source: str) -> list[str]:
    """What code names a format by: a format's name as a string ("text" is also a part of the answer),
    a recovered format's module, or a format's dialect or recovery class imported."""
    names = {cls.name for cls in FORMATS} - {"text"}
    recovered = [cls for cls in FORMATS if cls.recovery is not None]
    modules = {cls.__module__.rsplit(".", 1)[1] for cls in recovered}
    classes = {cls.__name__ for cls in FORMATS} | {cls.recovery.__name__ for cls in recovered if cls.recovery}
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and node.value in names:
            found.append(str(node.value))
        elif isinstance(node, ast.ImportFrom):
            found += [node.module] if (node.module or "").rsplit(".", 1)[-1] in modules else []
            found += [alias.name for alias in node.names if alias.name in classes]
    return found


def test_recovery_code_names_no_format() -> None:
    """Each format's recovery is its class's: the code that runs recovery holds no second table of
    formats, branches on no format's name, and imports no format."""
    for path in sorted(RECOVERY_CODE.glob("*.py")):
        assert _format_names_in(path.read_text()) == [], path.name
    probe = 'if dialect == "anthropic":\n    from ..dialects.recovery.openai_chat import ChatTranscript\n'
    assert sorted(_format_names_in(probe)) == ["ChatTranscript", "anthropic", "dialects.recovery.openai_chat"]


# A new format, whole: its dialect class names its recovery, and nothing in recovery's code changes.
class _EchoTranscript(Transcript):
    end_event = b"event: done\ndata: {}\n\n"
    turns = "turns"  # its requests hold their conversation here

    @classmethod
    def prefilled(cls, request: dict[str, Any], text: str) -> Prefilled | None:
        return Prefilled(dump_body({**request, "continue": text}), "")

    def error(self, event: Read) -> Failure | None:
        return Failure("upstream_error", event.raw, "oops") if event.name == "oops" else None

    def see(self, event: Read) -> None:
        if event.name == "token" and event.obj is not None:
            self.add("text", event.obj["t"])
        self.finished = self.finished or event.name == "stop"

    def splicer(self, strip: bool, attempt: int) -> Splicer:
        return _EchoSplicer(self, strip)


class _EchoSplicer(Splicer):
    def feed(self, event: Read) -> list[bytes] | Failure:
        if event.name == "token" and event.obj is not None:
            new = self.text("text", event.obj["t"])
            if new is None:
                return Failure("diverged")
            return [write({"t": new}, "token")] if new else []
        if event.name == "stop":
            held = self.matchers["text"].finish()
            return Failure("diverged") if held is None else [write({"t": held}, "token"), event.raw]
        return [event.raw]


class _Echo(Dialect):
    name = "echo"
    end_marker = "event: done"
    recovery = _EchoTranscript

    @classmethod
    def detect(cls, first: First) -> Dialect | None:
        return cls() if first.name in ("token", "stop", "oops") else None

    @classmethod
    def is_end(cls, raw: bytes) -> bool:
        return raw.startswith(b"event: done\n")


def _echo(*events: tuple[str, str | None]) -> bytes:
    return b"".join(write({"t": t} if t is not None else {}, name) for name, t in events)


@pytest.mark.parametrize("recovered", [True, False])
def test_a_new_format_is_one_class_recovery_included(
    monkeypatch: pytest.MonkeyPatch, recovered: bool
) -> None:
    # Its line in FORMATS: what the registry derives from it at import (the readers by name, detection).
    detection = importlib.import_module("sse_middleware._core.dialects.detect")
    monkeypatch.setitem(BY_NAME, _Echo.name, _Echo)
    monkeypatch.setattr(detection, "DETECTION", (_Echo, *registry.DETECTION))
    if not recovered:  # the control: the same class naming no recovery
        monkeypatch.setattr(_Echo, "recovery", None)
    recoverer = Recoverer("continue", 1, 0.0, dialect="echo", body="anchor")
    first = _echo(("token", "The quick "), ("token", "brown fox "), ("oops", None))
    client, failure = recoverer.feed(first)
    if not recovered:  # nothing reads its error event, and no failure of its run is recovered
        given_up = recoverer.fail(Failure("exception"))
        assert failure is None and client == [first]
        assert isinstance(given_up, GiveUp) and given_up.why == "not recoverable: format echo"
        return
    assert failure is not None
    request = json.dumps({"turns": [{"role": "user", "content": "hi"}]}).encode()
    decision = recoverer.fail(failure, request)
    assert isinstance(decision, Retry) and decision.recovery.dialect == "echo"
    assert decision.recovery.text == "The quick brown fox "
    turns = json.loads(decision.body)["turns"]  # the anchored re-run's body, in the format's shape
    assert turns[1] == {"role": "assistant", "content": "The quick brown fox "}
    assert "The quick brown fox" in turns[2]["content"]
    more, failure = recoverer.feed(
        _echo(("token", "Sure: The quick "), ("token", "brown fox"), ("token", " jumps."), ("stop", None))
        + _EchoTranscript.end_event
    )
    assert failure is None and recoverer.end() is None
    tokens = [json.loads(e.data)["t"] for e in parse(b"".join(client + more)) if e.event == "token"]
    assert "".join(tokens) == "The quick brown fox jumps."  # the anchor and what came before it dropped
    assert json.loads(prefill(b"{}", "echo", "Half").body) == {"continue": "Half"}  # its prefill too
