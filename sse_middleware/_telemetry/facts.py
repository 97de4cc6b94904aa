"""What a stream said about itself, and what its shell told us, kept as plain values until its end: the
model and response id, finish reasons, usage, the guards' work, notes of ours: a few calls per stream,
none per token. :class:`~.stream.StreamTelemetry` adds the per-token counters, the span and the metrics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from opentelemetry.util.types import AttributeValue

from . import semconv as sc

if TYPE_CHECKING:
    from .instruments import Instruments


class StreamFacts:
    """The facts of one stream (see the module); the attributes they give its span at the end."""

    __slots__ = (
        "_app_error",
        "_blocked",
        "_extra",
        "_finish",
        "_guard",
        "_in_tokens",
        "_instruments",
        "_model",
        "_operation",
        "_out_tokens",
        "_provider",
        "_response_id",
    )

    def __init__(self, owner: Instruments) -> None:
        self._instruments = owner
        self._operation = self._provider = self._model = self._response_id = ""
        self._finish: tuple[str, ...] = ()
        self._in_tokens: int | None = None
        self._out_tokens: int | None = None
        self._extra: dict[str, AttributeValue] | None = None  # attributes of ours that few streams have
        self._guard: list[float] | None = None  # checks, their seconds, faults; None: no guards
        self._blocked: str | None = None
        self._app_error: str | None = None  # the failure the stream itself reported, if it did

    def dialect(self, provider: str, operation: str) -> None:
        """What the stream speaks, e.g. ("openai", "chat"): gen_ai.provider.name and .operation.name."""
        self._provider, self._operation = provider, operation

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
        """Facts seen in the stream. Later values win (Anthropic's final usage comes last); finish
        reasons accumulate, each distinct one once, in order (one per choice when OpenAI's n > 1).
        ``error_type``: the app reported its own failure in the stream (AG-UI's ``RUN_ERROR``): the span
        fails with it, unless the stream ends with an error of ours."""
        if model:
            self._model = model
        if response_id:
            self._response_id = response_id
        if finish_reason and finish_reason not in self._finish:
            self._finish = (*self._finish, finish_reason)
        if input_tokens is not None:
            self._in_tokens = input_tokens
        if output_tokens is not None:
            self._out_tokens = output_tokens
        if error_type:
            self._app_error = error_type

    def note(self, name: str, value: AttributeValue) -> None:
        """An attribute of ours for the span that only some streams have (why an output check was off)."""
        if self._extra is None:
            self._extra = {}
        self._extra[name] = value

    def mark(self, what: str) -> None:
        """A fact about how the stream ended, as ``sse_middleware.<what> = true`` on the span:
        ``send_timeout`` (the client stopped reading and was given up on; like a disconnect, not an
        error), ``stopped`` (stopped on purpose, by its chat's ``DELETE``)."""
        self.note(sc._NS + what, True)

    def guard_check(self, seconds: float) -> None:
        """One check by the stream's guards, and how long they took."""
        found = self._guard = self._guard or [0.0, 0.0, 0.0]
        found[0] += 1
        found[1] += seconds
        self._instruments.guard_time.record(seconds)

    def guard_fault(self) -> None:
        """A guard failed and the text went on (``guard_failure="allow"``)."""
        found = self._guard = self._guard or [0.0, 0.0, 0.0]
        found[2] += 1

    def guard_blocked(self, reason: str) -> None:
        """A guard ended the stream: ``reason`` is the guard's code (or ``content_filter``, or
        ``guard_failure`` for a fault that failed closed)."""
        self._guard = self._guard or [0.0, 0.0, 0.0]
        if reason != "guard_failure":
            self._finish = (*self._finish, "content_filter")
        self._blocked = reason
        self._instruments.guard_blocked.add(1, {"sse_middleware.guard.reason": reason})

    def recovery_outcome(self, outcome: str, reason: str) -> None:
        """How a stream's recovery ended (``recovered``, ``gave_up``), counted by its first failure."""
        self.note(sc.RECOVERY_OUTCOME, outcome)
        self.note(sc.RECOVERY_REASON, reason)
        self._instruments.recoveries.add(1, {sc.RECOVERY_REASON: reason, sc.RECOVERY_OUTCOME: outcome})

    def _seen_attrs(self, attrs: dict[str, AttributeValue]) -> None:
        """The response's id, finish reasons and usage, where the stream said them."""
        if self._response_id:
            attrs[sc.GEN_AI_RESPONSE_ID] = self._response_id
        if self._finish:
            attrs[sc.GEN_AI_RESPONSE_FINISH_REASONS] = self._finish
        if self._in_tokens is not None:
            attrs[sc.GEN_AI_USAGE_INPUT_TOKENS] = self._in_tokens
        if self._out_tokens is not None:
            attrs[sc.GEN_AI_USAGE_OUTPUT_TOKENS] = self._out_tokens

    def _noted_attrs(self, attrs: dict[str, AttributeValue]) -> None:
        """Our notes, then what the stream's guards did: checks, their seconds, faults, whether one
        blocked (and why)."""
        if self._extra is not None:
            attrs.update(self._extra)
        if self._guard is not None:
            checks, seconds, faults = self._guard
            attrs[sc._NS + "guard.checks"] = int(checks)
            attrs[sc._NS + "guard.seconds"] = seconds
            attrs[sc._NS + "guard.faults"] = int(faults)
            attrs[sc._NS + "guard.blocked"] = self._blocked is not None
            if self._blocked is not None:
                attrs[sc._NS + "guard.reason"] = self._blocked
