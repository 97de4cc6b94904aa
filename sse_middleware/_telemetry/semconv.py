"""Names from the OpenTelemetry GenAI semantic conventions (*Development* status), and our own.

We keep our own constants rather than import the incubating ones, several already renamed upstream: a
rename is a one-line change here, never an ImportError on a user's machine.
"""

from __future__ import annotations

from typing import Final

# GenAI attributes (open-telemetry/semantic-conventions-genai, docs/registry/attributes/gen-ai.md).
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_REQUEST_STREAM: Final = "gen_ai.request.stream"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
# Stable general attributes (local too: opentelemetry-semantic-conventions is no runtime dependency).
ERROR_TYPE: Final = "error.type"
HTTP_REQUEST_METHOD: Final = "http.request.method"
HTTP_ROUTE: Final = "http.route"
URL_PATH: Final = "url.path"

# GenAI server metrics with the bucket boundaries the conventions say they SHOULD use
# (semantic-conventions-genai, docs/gen-ai/gen-ai-metrics.md, "Generative AI model server metrics").
METRIC_TTFT: Final = "gen_ai.server.time_to_first_token"
METRIC_TPOT: Final = "gen_ai.server.time_per_output_token"
METRIC_DURATION: Final = "gen_ai.server.request.duration"
TTFT_BUCKETS: Final = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
)  # fmt: skip
TPOT_BUCKETS: Final = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
DURATION_BUCKETS: Final = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)  # fmt: skip
# Ours. One observation per gap (vLLM style), so a p95 over gaps is real, not a mean of means. Buckets:
# the TPOT ones plus vLLM's tail (its INTER_TOKEN_LATENCY_BUCKETS), since one gap can be a tool call.
METRIC_INTER_CHUNK: Final = "sse_middleware.inter_chunk.duration"
INTER_CHUNK_BUCKETS: Final = (*TPOT_BUCKETS, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
METRIC_SLO_VIOLATIONS: Final = "sse_middleware.slo.violations"
METRIC_GUARD_TIME: Final = "sse_middleware.guard.duration"
METRIC_GUARD_BLOCKED: Final = "sse_middleware.guard.blocked"
METRIC_RECOVERIES: Final = "sse_middleware.recoveries"
SLO_KIND: Final = "kind"

_NS: Final = "sse_middleware."
FIRST_TOKEN_EVENT: Final = _NS + "first_token"  # our namespace: the conventions define no such event
RECOVERY_EVENT: Final = _NS + "recovery"  # one per attempt of mid-stream recovery
RECOVERY_ATTEMPTS: Final = _NS + "recovery.attempts"
RECOVERY_OUTCOME: Final = _NS + "recovery.outcome"  # recovered | gave_up
RECOVERY_REASON: Final = _NS + "recovery.reason"
USAGE_ESTIMATED: Final = _NS + "usage.estimated"  # gen_ai.usage.output_tokens is our estimate
