"""What the official openai SDK reads from a chat completions stream, for the recovery tests."""

from __future__ import annotations

from typing import Any, cast

import openai
from openai.types.chat import ChatCompletionChunk

MESSAGES = [{"role": "user", "content": "Why stream?"}]


def chat_answer(base_url: str, model: str, **create: Any) -> dict[str, Any]:
    """The SDK's read of one streamed answer: text, ids, finish reasons, and the exception it raised.
    ``create``: more arguments of ``chat.completions.create`` (headers, query, metadata)."""
    client = openai.OpenAI(base_url=base_url, api_key="test", max_retries=0)
    got: dict[str, Any] = {"text": "", "ids": set(), "finish": [], "error": None}
    try:
        stream = client.chat.completions.create(
            model=model,
            messages=MESSAGES,  # type: ignore[arg-type]
            stream=True,
            **create,
        )
        for chunk in cast("openai.Stream[ChatCompletionChunk]", stream):  # **create hides the overload
            got["ids"].add(chunk.id)
            for choice in chunk.choices:
                got["text"] += choice.delta.content or ""
                if choice.finish_reason:
                    got["finish"].append(choice.finish_reason)
    except Exception as exc:
        got["error"] = exc
    return got
