"""``python -m sse_middleware check URL [-X METHOD] [-d BODY] [-H 'Name: value'] [--timeout S] [--json]``.

Exit 0 when the stream looks healthy, 1 when the check found a problem, 2 when there was no stream at all.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from .diagnose import diagnose
from .fetch import NoStream, Request, run
from .measure import measure
from .recorder import Recorder
from .report import as_json, human, no_stream

HEALTHY, PROBLEM, NO_STREAM = 0, 1, 2
_PROG = "sse-middleware" if Path(sys.argv[0]).name == "sse-middleware" else "python -m sse_middleware"


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    request = Request(
        args.url,
        args.method or ("POST" if args.data is not None else "GET"),
        _body(args.data),
        [_header(h) for h in args.header],
        args.timeout,
    )
    recorder = Recorder()
    try:
        tl = run(request, recorder)
    except NoStream as exc:
        tl = recorder.timeline
        if args.json:
            print(json.dumps(as_json(request.url, request.method, tl, None, None, NO_STREAM, str(exc))))
        else:
            sys.stdout.write(no_stream(request.url, request.method, tl, str(exc)))
        return NO_STREAM
    m = measure(tl)
    d = diagnose(tl, m)
    code = PROBLEM if d.problems else HEALTHY
    if args.json:
        print(json.dumps(as_json(request.url, request.method, tl, m, d, code), ensure_ascii=False))
    else:
        sys.stdout.write(human(request.url, request.method, tl, m, d, code, ascii=not _unicode_ok()))
    return code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=_PROG)
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser(
        "check",
        help="stream from a URL as a client would and say whether it really streamed",
        description=(
            "Streams from URL as a client would, times every read and event, and names what keeps the "
            "stream from streaming (buffering proxies, compression, missing headers, cut streams), with "
            "the likely cause and fix. Exit 0 healthy, 1 problems found, 2 no stream at all."
        ),
    )
    check.add_argument("url")
    check.add_argument("-X", "--request", dest="method", help="HTTP method (default GET, or POST with -d)")
    check.add_argument(
        "-d", "--data", help="request body; @FILE reads a file, @- stdin (Content-Type defaults to JSON)"
    )
    check.add_argument(
        "-H",
        "--header",
        action="append",
        default=[],
        help="'Name: value' (repeatable); 'Name:' drops a default",
    )
    check.add_argument("--timeout", type=float, default=60.0, help="seconds for the whole check (default 60)")
    check.add_argument("--json", action="store_true", help="print one JSON object instead of the report")
    return parser


def _header(text: str) -> tuple[str, str]:
    name, colon, value = text.partition(":")
    if not colon or not name.strip():
        raise SystemExit(f"{_PROG} check: a header is 'Name: value', not {text!r}")
    return name.strip(), value.strip()


def _body(data: str | None) -> bytes | None:
    if data is None:
        return None
    if data == "@-":
        return sys.stdin.buffer.read()
    if data.startswith("@"):
        return Path(data[1:]).read_bytes()
    return data.encode()


def _unicode_ok() -> bool:
    try:
        "█▁".encode(sys.stdout.encoding or "ascii")
    except (UnicodeEncodeError, LookupError):
        return False
    return True
