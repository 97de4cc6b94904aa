"""``request_model``: the top-level "model" of a request body, or None; never a wrong one.

The reference is ``json.loads`` of the whole body: for a complete body the answer must be the same; for
any prefix of it (a body cut at the bound, or one the app read only in part), the answer must be that
same model or None.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sse_middleware._telemetry.request_model import MAX_MODEL_CHARS, PEEK_BYTES, BodyPeek, request_model

from ..support.tier import examples


def reference(body: bytes) -> str | None:
    try:
        obj = json.loads(body)
    except ValueError:
        return None
    model = obj.get("model") if isinstance(obj, dict) else None
    return model if isinstance(model, str) and 0 < len(model) <= MAX_MODEL_CHARS else None


MESSAGES = [{"role": "user", "content": 'say "model": "fake" and {"model": "nested"}'}]
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"model": {"type": "string"}}}}]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        # openai-python and anthropic-sdk-python: "model" after "messages".
        ({"messages": MESSAGES, "model": "gpt-4o", "stream": True}, "gpt-4o"),
        ({"max_tokens": 64, "messages": MESSAGES, "model": "claude-x", "stream": True}, "claude-x"),
        ({"model": "first", "messages": MESSAGES}, "first"),
        ({"messages": MESSAGES, "model": "mid", "tools": TOOLS}, "mid"),
        ({"messages": MESSAGES, "tools": TOOLS}, None),  # "model" only nested: not the request's
        ({"messages": [{"model": "nested"}], "metadata": {"model": "x"}}, None),
        ({"messages": MESSAGES, "model": None}, None),
        ({"messages": MESSAGES, "model": 3}, None),
        ({"messages": MESSAGES, "model": ""}, None),
        ({"messages": MESSAGES, "model": "m" * (MAX_MODEL_CHARS + 1)}, None),
        ({"model": 'ünïcødé/モデル\n"q"', "x": 1}, 'ünïcødé/モデル\n"q"'),
        ({'a"model': "not the key", "model": "real"}, "real"),
        ({"messages": [], "model": "real", 'x"model': "a key ending in model"}, "real"),
        ([{"model": "in an array"}], None),
    ],
)
def test_known_bodies(body: object, expected: str | None) -> None:
    for separators in ((",", ":"), (", ", ": ")):
        data = json.dumps(body, separators=separators, ensure_ascii=False).encode()
        assert request_model(data, complete=True) == expected == reference(data)
    indented = json.dumps(body, indent=2).encode()  # whitespace and newlines
    assert request_model(indented, complete=True) == expected


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"model",
        b'"model"',
        b'{"model"',
        b'{"model": ',
        b'{"model": "unterminated',
        b"\xff\xfe{}",
        b"model=gpt-4o&stream=true",
        b'{"model": "x"',
        b'{"model" "x"}',
        b'{"messages": [], "model": "x"',
    ],
)
def test_not_json_or_cut_gives_none_or_the_model(body: bytes) -> None:
    for complete in (True, False):
        assert request_model(body, complete=complete) in (None, "x")
    assert request_model(b'  \r\n\t{"messages": [1], "model": "x"}  \n', complete=True) == "x"


def test_a_string_holding_a_fake_top_level_member_is_not_taken() -> None:
    # The text '", "model": "evil' inside a string, near the end: only the real member counts.
    body = json.dumps({"model": "real", "messages": [{"content": 'a", "model": "evil'}]}).encode()
    assert request_model(body, complete=True) == "real"
    body = json.dumps({"messages": [{"content": 'a", "model": "evil'}]}).encode()
    assert request_model(body, complete=True) is None


def test_many_nested_model_keys_after_the_real_one() -> None:
    body = json.dumps({"model": "real", "tools": [{"model": str(i)} for i in range(10)]}, indent=1)
    assert request_model(body.encode(), complete=True) == "real"


def test_a_cut_body_is_walked_from_the_start() -> None:
    long = "x" * PEEK_BYTES
    early = json.dumps({"stream": True, "model": "early", "messages": [{"content": long}]}).encode()
    assert request_model(early[:PEEK_BYTES], complete=False) == "early"
    late = json.dumps({"messages": [{"content": long}], "model": "late"}).encode()
    assert request_model(late[:PEEK_BYTES], complete=False) is None  # cut before it: a miss, not a guess
    # A nested object that happens to close where the body was cut is not mistaken for the outermost.
    cut = b'{"messages": [{"model": "nested", "content": "hi"}'
    assert request_model(cut, complete=False) is None


JSON_LEAVES = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12)
JSON = st.recursive(
    JSON_LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["model", "messages", "content", "m", 'model"']) | st.text(max_size=6),
            inner,
            max_size=4,
        )
    ),
    max_leaves=20,
)
MODEL = st.none() | st.text(min_size=0, max_size=20) | st.integers()


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    members = draw(st.dictionaries(st.text(max_size=8), JSON, max_size=5))
    model = draw(MODEL)
    if model is not None:
        members["model"] = model
        keys = list(members)
        order = draw(st.permutations(keys))
        members = {k: members[k] for k in order}
    indent = draw(st.sampled_from([None, 1]))
    ascii_only = draw(st.booleans())
    return json.dumps(members, indent=indent, ensure_ascii=ascii_only).encode()


@settings(max_examples=examples(400), deadline=None)
@given(bodies(), st.data())
def test_same_as_json_loads_and_never_wrong_on_a_prefix(body: bytes, data: st.DataObject) -> None:
    expected = reference(body)
    assert request_model(body, complete=True) == expected
    cut = data.draw(st.integers(0, len(body)))
    assert request_model(body[:cut], complete=False) in (None, expected)


@settings(max_examples=examples(300), deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_never_raise(body: bytes) -> None:
    for complete in (True, False):
        assert request_model(b'{"model": "a", "x": ' + body, complete=complete) in (None, "a")
        request_model(body, complete=complete)


def peek_of(*chunks: bytes, final: bool = True) -> BodyPeek:
    peek = BodyPeek()
    for i, chunk in enumerate(chunks):
        peek.see({"type": "http.request", "body": chunk, "more_body": not final or i < len(chunks) - 1})
        peek.see({"type": "http.disconnect"})  # not a body message: ignored
    return peek


def test_body_peek_reads_the_chunks_the_app_read() -> None:
    peek = peek_of(b'{"messages": [{"model": "n", "x": 1}', b'], "model": "m"}')
    assert peek.model() == "m"
    assert peek.model() is None  # given up: nothing is kept after the first answer
    # Control: the same bytes, but the app has not read the last chunk: a prefix, so no proof.
    assert peek_of(b'{"messages": [{"model": "n", "x": 1}', final=False).model() is None
    assert peek_of(b'{"messages": [{"model": "n", "x": 1}]}').model() is None  # only nested


def test_body_peek_past_the_bound_is_a_cut_body() -> None:
    filler = b"x" * (PEEK_BYTES // 2)
    head = b'{"stream": true, "model": "early", "messages": ["'
    assert peek_of(head, filler, filler, b'"], "model2": 1}').model() == "early"
    late = peek_of(b'{"messages": ["', filler, filler, b'"], "model": "late"}')
    assert late.model() is None
