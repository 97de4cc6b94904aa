// Fetches a stream with Node's own fetch (undici, what the AI SDK and the OpenAI and Anthropic JS SDKs
// use), as a chat POST: undici asks for gzip and decodes it. Usage: node fetch_encoding.mjs URL.
// Prints one JSON object: the Content-Encoding the response had, and its decoded body.
const response = await fetch(process.argv[2], {
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify({ id: "chat-1", messages: [{ id: "u1", role: "user", parts: [{ type: "text", text: "hi" }] }] }),
});
console.log(JSON.stringify({ encoding: response.headers.get("content-encoding"), body: await response.text() }));
