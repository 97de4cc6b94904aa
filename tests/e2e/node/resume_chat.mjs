// The AI SDK's own resume, as useChat({ resume: true }) does it, with the ai package's transport.
// Usage: node resume_chat.mjs POST_BASE RESUME_BASE CHAT_ID MODE
//   MODE "resume": send a message, read a few chunks, abort (a page reload), then
//     transport.reconnectToStream({ chatId }) against RESUME_BASE (another host, or the same) and read it.
//   MODE "reconnect": only reconnectToStream (an unknown chat, a finished one, or a stopped one).
//   MODE "send": only the first half of "resume" (the test kills the host before it reconnects).
//   MODE "stop": send a message, read a few chunks, DELETE {api}/{chatId}/stream (how an app stops a
//     resumable stream with the SDK's stop()), abort, then reconnect.
// Prints one JSON object: the text read before the abort, the text of the resumed stream (null when
// reconnectToStream returned null: a 204), how many "start" parts the resumed stream had, and any error.
import { DefaultChatTransport, readUIMessageStream } from "ai";

const [postBase, resumeBase, chatId, mode] = process.argv.slice(2);
const result = { before: null, resumed: null, starts: 0, error: null };

function text(message) {
  return message ? message.parts.filter((p) => p.type === "text").map((p) => p.text).join("") : "";
}

async function readAll(stream) {
  let last = null;
  const counted = stream.pipeThrough(
    new TransformStream({
      transform(chunk, controller) {
        if (chunk.type === "start") result.starts += 1;
        controller.enqueue(chunk);
      },
    }),
  );
  for await (const message of readUIMessageStream({ stream: counted, terminateOnError: true })) last = message;
  return text(last);
}

try {
  if (mode !== "reconnect") {
    const abort = new AbortController();
    const sender = new DefaultChatTransport({ api: `${postBase}/api/chat` });
    const stream = await sender.sendMessages({
      chatId,
      messageId: undefined,
      trigger: "submit-message",
      abortSignal: abort.signal,
      messages: [{ id: "u1", role: "user", parts: [{ type: "text", text: "hi" }] }],
    });
    const reader = stream.getReader();
    let before = "";
    while (before.split(" ").length < 6) {
      const { value } = await reader.read();
      if (value.type === "text-delta") before += value.delta;
    }
    result.before = before;
    if (mode === "stop") await fetch(`${postBase}/api/chat/${encodeURIComponent(chatId)}/stream`, { method: "DELETE" });
    abort.abort();
    await reader.cancel().catch(() => {});
    if (mode === "send") {
      console.log(JSON.stringify(result));
      process.exit(0);
    }
  }
  const transport = new DefaultChatTransport({ api: `${resumeBase}/api/chat` });
  const resumed = await transport.reconnectToStream({ chatId });
  result.resumed = resumed === null ? null : await readAll(resumed);
} catch (error) {
  result.error = { name: error?.name ?? null, message: String(error?.message ?? error) };
}
console.log(JSON.stringify(result));
