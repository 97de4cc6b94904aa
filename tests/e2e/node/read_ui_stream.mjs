// Reads a UI message stream with the Vercel AI SDK's own client code: DefaultChatTransport (what useChat
// uses) fetches and parses the stream into chunks, readUIMessageStream builds the message from them.
// Usage: node read_ui_stream.mjs URL. Prints one JSON object: the chunks by type, the final message's
// parts, each tool call's input as the SDK parsed it from the tool-input-delta parts alone, and the error
// the SDK reported (null when none), and the finish part as the SDK parsed it (null when none).
import { DefaultChatTransport, readUIMessageStream } from "ai";

const url = process.argv[2];
const transport = new DefaultChatTransport({ api: url });
const result = { chunks: {}, parts: [], streamed: {}, error: null, finish: null };
let last = null;
try {
  const stream = await transport.sendMessages({
    chatId: "chat-1",
    messageId: undefined,
    trigger: "submit-message",
    abortSignal: undefined,
    messages: [{ id: "u1", role: "user", parts: [{ type: "text", text: "hi" }] }],
  });
  const counted = stream.pipeThrough(
    new TransformStream({
      transform(chunk, controller) {
        result.chunks[chunk.type] = (result.chunks[chunk.type] ?? 0) + 1;
        if (chunk.type === "finish") result.finish = chunk; // as the SDK's schema parsed it
        controller.enqueue(chunk);
      },
    }),
  );
  for await (const message of readUIMessageStream({ stream: counted, terminateOnError: true })) {
    last = message;
    for (const part of message.parts) {
      if (part.state === "input-streaming") result.streamed[part.toolCallId] = part.input; // from the deltas
    }
  }
} catch (error) {
  result.error = { name: error?.name ?? null, message: String(error?.message ?? error) };
}
result.parts = last ? last.parts : [];
console.log(JSON.stringify(result));
