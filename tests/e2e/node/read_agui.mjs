// Runs an AG-UI agent with the protocol's own client: @ag-ui/client's HttpAgent posts the RunAgentInput,
// parses the event stream, verifies it (its own event verification rejects a stream that breaks the
// protocol) and applies it to the conversation.
// Usage: node read_agui.mjs URL INPUT_JSON, INPUT_JSON with threadId, runId, messages and tools.
// Prints one JSON object: the events by type (count) and in order (types), the conversation after the
// run (messages: the user's input plus what the run added, as the client built it), the RUN_ERROR the
// client reported (runError: message and code, null when none) and any failure of the run itself
// (failed: the error's message, e.g. a parse or verification failure or a cut connection; null when none).
import { HttpAgent } from "@ag-ui/client";

const [url, raw] = process.argv.slice(2);
const input = JSON.parse(raw);
const agent = new HttpAgent({ url, threadId: input.threadId, initialMessages: input.messages });
const result = { count: {}, types: [], messages: [], runError: null, failed: null };
// A cut connection also rejects a promise inside the client that nobody awaits; it is the same failure,
// already reported by onRunFailed, and must not turn the exit status of this reader into a crash.
process.on("unhandledRejection", (error) => {
  result.failed = result.failed ?? String(error?.message ?? error);
});
try {
  await agent.runAgent(
    { runId: input.runId, tools: input.tools ?? [] },
    {
      onEvent({ event }) {
        result.count[event.type] = (result.count[event.type] ?? 0) + 1;
        result.types.push(event.type);
      },
      onRunErrorEvent({ event }) {
        result.runError = { message: event.message, code: event.code ?? null };
      },
      onRunFailed({ error }) {
        result.failed = String(error?.message ?? error);
      },
    },
  );
} catch (error) {
  // A RUN_ERROR also rejects the run; only other failures count as the run failing.
  if (result.runError === null) result.failed = result.failed ?? String(error?.message ?? error);
}
result.messages = agent.messages;
console.log(JSON.stringify(result));
