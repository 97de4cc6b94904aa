// An incremental text/event-stream parser (WHATWG rules), fed with the bytes of one fetch() body.
// EventSource would hide ": ping" comments; the lab wants to show them, so it parses by hand.
"use strict";

class SSEParser {
  constructor() {
    this.decoder = new TextDecoder("utf-8"); // strips one leading BOM, keeps partial UTF-8 across reads
    this.line = "";          // the unfinished line
    this.pendingCR = false;  // a CR at the end of a read may be half of a CRLF
    this.idBuffer = "";      // the last id field seen; it becomes lastEventId when an event is dispatched
    this.lastEventId = "";   // what a reconnect sends as Last-Event-ID
    this.reset();
  }

  reset() {
    this.data = [];
    this.event = "";
    this.hasData = false;
  }

  /** Feed one network read; returns [{type: "event", event, data} | {type: "comment", text}]. */
  feed(bytes) {
    return this._text(this.decoder.decode(bytes, { stream: true }));
  }

  /** End of body: an event without its blank line is discarded, as the spec says. */
  close() {
    this._text(this.decoder.decode());
    return [];
  }

  _text(text) {
    const out = [];
    let start = 0;
    if (text.length && this.pendingCR) {
      if (text[0] === "\n") start = 1; // the LF of a CRLF split across two reads
      this.pendingCR = false;
    }
    for (let i = start; i < text.length; i++) {
      const c = text[i];
      if (c !== "\n" && c !== "\r") continue;
      this._line(this.line + text.slice(start, i), out);
      this.line = "";
      if (c === "\r") {
        if (i + 1 === text.length) this.pendingCR = true;
        else if (text[i + 1] === "\n") i++;
      }
      start = i + 1;
    }
    this.line += text.slice(start);
    return out;
  }

  _line(line, out) {
    if (line === "") {
      this.lastEventId = this.idBuffer;
      if (this.hasData) out.push({ type: "event", event: this.event || "message", data: this.data.join("\n") });
      this.reset();
      return;
    }
    if (line[0] === ":") {
      out.push({ type: "comment", text: line.slice(1).replace(/^ /, "") });
      return;
    }
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "data") {
      this.data.push(value);
      this.hasData = true;
    } else if (field === "event") {
      this.event = value;
    } else if (field === "id" && !value.includes("\0")) {
      this.idBuffer = value;
    }
  }
}

window.SSEParser = SSEParser;
