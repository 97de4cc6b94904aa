"""What the pipeline tells whoever watches a stream (the telemetry implements it; the core imports none)."""

from __future__ import annotations

from typing import Protocol


class StreamObserver(Protocol):
    def dialect(self, provider: str, operation: str) -> None:
        """What the stream speaks, e.g. ("openai", "chat")."""

    def chunk(self, now: float, content: int) -> None:
        """One app event. Called per token: keep it cheap. ``content``: whether it carries output, as
        the number of characters of its text where the pipeline read that text anyway (a merged or
        guarded delta), else ``True`` (it has output, of a length not read) or ``False``."""

    def response(
        self,
        *,
        model: str | None = None,
        response_id: str | None = None,
        finish_reason: str | None = None,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        error_type: str | None = None,
    ) -> None:
        """What an event said about the response (a dialect's ``info``); ``error_type``: the stream
        reported its own failure in its format (AG-UI's ``RUN_ERROR``, by its ``code``)."""
