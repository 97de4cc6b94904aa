// A page with the AI SDK's React hook, as an app writes it: useChat with DefaultChatTransport. Bundled at
// test time with esbuild (tests/support/chat_page.py); the test serves it on the origin of the server under
// test, so the hook's requests go to that server. The query says what to do: `id` (the chat id), `api` (the
// chat route, its own query included) and `resume=1` (useChat({ resume: true }): GET {api}/{id}/stream on
// mount). window.__send(text) sends a message; window.__chat is the hook's state as of its last render, and
// window.__statuses every status it has had, in order.
import { useChat } from "@ai-sdk/react";
import { DefaultChatTransport } from "ai";
import { createRoot } from "react-dom/client";

const query = new URLSearchParams(location.search);
const transport = new DefaultChatTransport({ api: query.get("api") ?? "/api/chat" });
const statuses = (window.__statuses = []);

function text(message) {
  return message.parts.filter((p) => p.type === "text").map((p) => p.text).join("");
}

function Chat() {
  const { messages, status, error, sendMessage } = useChat({
    id: query.get("id") ?? "chat-1",
    resume: query.get("resume") === "1",
    transport,
  });
  window.__send = (words) => sendMessage({ text: words });
  if (statuses[statuses.length - 1] !== status) statuses.push(status);
  window.__chat = { status, messages, error: error ? String(error.message ?? error) : null };
  return (
    <main>
      <p id="status">{status}</p>
      {messages.map((m) => (
        <p key={m.id} className={m.role}>
          {text(m)}
        </p>
      ))}
    </main>
  );
}

createRoot(document.getElementById("root")).render(<Chat />);
