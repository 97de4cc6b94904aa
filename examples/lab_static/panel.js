// One panel of the lab: runs one request, records what it showed and when, and can show any instant again.
"use strict";

// Mirrors TOKEN_RE in examples/lab_model.py, to count tokens in text that arrives coalesced.
const CJK = "\\u3000-\\u30ff\\u3400-\\u9fff\\uac00-\\ud7af\\uff00-\\uffef";
const EMOJI = "\\u{1F000}-\\u{1FAFF}\\u2600-\\u27BF\\u200D\\uFE0F";
const TOKEN_RE = new RegExp(`\\n+|[ \\t]*(?:[${CJK}]|[${EMOJI}]|[^\\s${CJK}${EMOJI}]{1,4})|[ \\t]+`, "gu");
const countTokens = (text) => (text.match(TOKEN_RE) || []).length;
// The lab's own notes to its page (a re-run says so): comments, which every client ignores, but no ping.
const NOTE = "lab note: ";

const STALL_MS = 30000; // a client-side watchdog: a panel never hangs forever, whatever the server does
const fmtS = (s) => (s < 10 ? s.toFixed(2) : s.toFixed(1)) + " s";
const fmtMs = (s) => (s * 1000).toFixed(s < 0.1 ? 1 : 0) + " ms";
const grade = (s, good, ok) => (s <= good ? "good" : s <= ok ? "warn" : "bad");

class Panel {
  constructor(root, spec, log) {
    this.root = root;
    this.spec = spec;
    this.log = (t, kind, text) => log(t, spec.id, kind, text);
    this.$ = (sel) => root.querySelector(sel);
    this.metric = (name) => root.querySelector(`[data-metric="${name}"]`);
    root.dataset.panel = spec.id;
    this.$(".title").textContent = spec.title;
    this.$(".subtitle").textContent = spec.subtitle;
    this.$(".subtitle").title = spec.subtitle; // whole, where two lines cut it short
    this.$(".felt-note").textContent = spec.stream ? "= TTFT: reading starts here" : "= E2E: nothing until the end";
    this.canvas = this.$(".timeline");
    this.reset();
  }

  reset() {
    this.text = "";
    this.snaps = [];
    this.marks = [];
    this.shown = -2;
    // tokens: of the answer shown (counted as the model counts them); usage: what the stream reported,
    // which after a re-run is what was billed, every attempt's (a failed one's estimated).
    this.s = { t: 0, len: 0, frames: 0, events: 0, heartbeats: 0, tokens: 0, exact: false, usage: null,
      ttft: null, lastText: null, end: null, status: "idle", error: null };
    this.render(0);
  }

  /** Record the state now (a snapshot per change) so the scrubber can show this instant again. */
  snap(t, changes) {
    Object.assign(this.s, changes, { t });
    if (!this.s.exact) this.s.tokens = this.spec.stream ? countTokens(this.text) : 0;
    this.snaps.push({ ...this.s, len: this.text.length });
  }

  /** Run this panel's request. ``drop`` ({at, offline}, seconds): the network cuts a streamed panel's
   *  connection at ``at`` on the shared clock, for ``offline`` seconds; then a stream whose events had ids
   *  reconnects with ``Last-Event-ID`` (what EventSource does on its own), one without has lost the rest. */
  async run(body, t0, signal, drop = null, extraHeaders = {}) {
    const now = () => (performance.now() - t0) / 1000;
    this.snap(0, { status: "waiting" });
    let link = new AbortController(), why = null; // the connection now, and why it was cut: stop, stall, drop
    const cut = (reason) => { why = why || reason; link.abort(); };
    let timer = null;
    const rearm = () => { clearTimeout(timer); timer = setTimeout(() => cut("stall"), STALL_MS); };
    rearm();
    signal.addEventListener("abort", () => cut("stop"));
    const dropTimer = drop && this.spec.stream
      ? setTimeout(() => cut("drop"), Math.max(0, t0 + drop.at * 1000 - performance.now())) : null;
    const headers = { "Content-Type": "application/json", ...extraHeaders };
    let lastEventId = "";
    try {
      for (;;) {
        const parser = new SSEParser();
        try {
          const resp = await fetch(this.spec.url, {
            method: "POST", signal: link.signal, headers, body: JSON.stringify({ ...body, stream: this.spec.stream }),
          });
          await this._read(resp, parser, now, rearm);
          break;
        } catch (exc) {
          lastEventId = parser.lastEventId || lastEventId;
          if (why !== "drop") throw exc;
          const t = now();
          this.marks.push({ t, kind: "drop" });
          this.snap(t, {});
          if (!lastEventId) {
            this.log(t, "err", "network drop: the connection broke; its events had no ids to resume from");
            throw Object.assign(new Error("dropped"), { kind: "drop" });
          }
          this.log(t, "drop", `network drop: offline for ${drop.offline} s`);
          await new Promise((ok) => setTimeout(ok, drop.offline * 1000));
          if (signal.aborted) { why = "stop"; throw new Error("stopped"); }
          link = new AbortController();
          why = null;
          rearm();
          headers["Last-Event-ID"] = lastEventId;
          this.marks.push({ t: now(), kind: "resume" });
          this.log(now(), "resume", `reconnected with Last-Event-ID: ${lastEventId}`);
        }
      }
      const t = now();
      this.marks.push({ t, kind: "end" });
      this.snap(t, { status: "done", end: t });
      this.log(t, "done", `done: ${this.s.tokens} tokens in ${this.s.frames} frame${this.s.frames === 1 ? "" : "s"}`);
    } catch (exc) {
      const t = now();
      let error;
      if (why === "stop") error = { title: "Stopped", message: "You stopped this run." };
      else if (why === "stall") error = { title: "Stalled", message: `No bytes for ${STALL_MS / 1000} s.` };
      else if (exc.kind === "event") error = { title: "Error event from the server", message: exc.message, detail: exc.detail };
      else if (exc.kind === "filter") error = { title: "Stopped by a guard", message: exc.message, detail: exc.detail };
      else if (exc.kind === "http") error = { title: `HTTP ${exc.status}`, message: exc.message };
      else if (exc.kind === "eof") error = { title: "Truncated", message: exc.message };
      else if (exc.kind === "drop") {
        error = { title: "Connection dropped", message: "The network dropped mid-answer. The events had no ids, " +
          "so there is nothing to resume from: the rest of the answer is lost (asking again starts it over)." };
      } else {
        error = { title: "Connection dropped", message: "The connection broke mid-answer and the server said nothing: " +
          "to the client this looks exactly like a network failure." };
        this.log(t, "err", `connection dropped (${exc.message})`);
      }
      // A guard that stopped the answer is the content filter doing its job, as the format's own
      // ending says: the run stopped, it did not fail.
      const status = exc.kind === "filter" && why === null ? "stopped" : "error";
      this.marks.push({ t, kind: status === "stopped" ? "stop" : "err" });
      this.snap(t, { status, end: t, error });
    } finally {
      clearTimeout(timer);
      clearTimeout(dropTimer);
    }
  }

  /** Read one response to its end (a streamed one must end with [DONE]); throws on anything else. */
  async _read(resp, parser, now, rearm) {
    const reader = resp.body.getReader();
    const chunks = [];
    let done = false;
    let filtered = null;
    for (;;) {
      const { value, done: eof } = await reader.read();
      rearm();
      if (eof) break;
      const t = now();
      if (!this.spec.stream || !resp.ok) {
        chunks.push(value);
        this.marks.push({ t, kind: "frame" });
        this.snap(t, { frames: this.s.frames + 1 });
        continue;
      }
      const before = this.text.length;
      const changes = { frames: this.s.frames + 1, events: this.s.events, heartbeats: this.s.heartbeats };
      for (const item of parser.feed(value)) {
        if (item.type === "comment" && item.text.startsWith(NOTE)) {
          this.log(t, "note", item.text.slice(NOTE.length));
          continue;
        }
        if (item.type === "comment") {
          changes.heartbeats++;
          this.marks.push({ t, kind: "hb" });
          this.log(t, "hb", `: ${item.text}`);
          continue;
        }
        changes.events++;
        if (item.data === "[DONE]") { done = true; continue; }
        const msg = JSON.parse(item.data);
        if (msg.error || item.event === "error") {
          const err = msg.error || msg;
          this.log(t, "err", `${item.event === "error" ? "event: error " : ""}data: ${item.data}`);
          throw Object.assign(new Error(err.message || "error event"), { kind: "event", detail: err });
        }
        for (const choice of msg.choices || []) {
          this.text += choice.delta?.content || "";
          // OpenAI's own way to say "filtered"; the middleware adds what its guard said.
          if (choice.finish_reason === "content_filter") {
            filtered = msg.content_filter || { message: "The answer was filtered." };
            this.log(t, "err", `finish_reason: content_filter ${JSON.stringify(filtered)}`);
          }
        }
        if (msg.usage) changes.usage = msg.usage.completion_tokens;
      }
      if (this.text.length > before) {
        changes.lastText = t;
        if (this.s.ttft === null) {
          changes.ttft = t;
          this.log(t, "first", `first text after ${fmtS(t)}`);
        }
        changes.status = "streaming";
      }
      this.marks.push({ t, kind: this.text.length > before ? "text" : "frame" });
      this.snap(t, changes);
    }
    const t = now();
    if (!this.spec.stream || !resp.ok) {
      const raw = new TextDecoder().decode(await new Blob(chunks).arrayBuffer());
      let doc = null;
      try { doc = JSON.parse(raw); } catch { /* not JSON: shown below as text */ }
      if (!resp.ok) {
        const message = doc?.error?.message || raw.slice(0, 200) || resp.statusText;
        this.log(t, "err", `HTTP ${resp.status}: ${raw.slice(0, 160)}`);
        throw Object.assign(new Error(message), { kind: "http", status: resp.status });
      }
      this.text = doc.choices[0].message.content;
      this.snap(t, { ttft: t, lastText: t, tokens: doc.usage?.completion_tokens ?? 0, exact: true });
    } else if (this.s.usage !== null && this.s.usage !== countTokens(this.text)) {
      this.log(t, "note", `usage: ${this.s.usage} tokens billed (every attempt's, a failed one's estimated), ` +
        `not the answer's ${countTokens(this.text)}`);
    }
    if (this.spec.stream && resp.ok && !done) {
      throw Object.assign(new Error("The stream ended without [DONE]: the answer may be cut off."), { kind: "eof" });
    } else if (filtered) {
      throw Object.assign(new Error(filtered.message), { kind: "filter", detail: filtered });
    }
  }

  /** Show the panel as it was at time t (seconds on the shared clock). */
  render(t) {
    let lo = 0, hi = this.snaps.length - 1, idx = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (this.snaps[mid].t <= t) { idx = mid; lo = mid + 1; } else hi = mid - 1;
    }
    const s = idx >= 0 ? this.snaps[idx] : { ...this.s, len: 0, status: this.snaps.length ? "waiting" : this.s.status };
    if (idx !== this.shown) {
      this.shown = idx;
      const streaming = s.status === "waiting" || s.status === "streaming";
      const content = this.$(".content");
      const follow = content.scrollTop + content.clientHeight >= content.scrollHeight - 24;
      content.innerHTML = MD.render(this.text.slice(0, s.len), streaming);
      content.dataset.placeholder = s.status !== "waiting" ? "" : this.spec.stream
        ? "Waiting for the first token…" : "Nothing to read until the whole answer is ready.";
      content.classList.toggle("streaming", streaming && s.len > 0);
      if (follow) content.scrollTop = content.scrollHeight;
      this.root.dataset.state = s.status;
      this.$(".status").textContent = { idle: "idle", waiting: "waiting", streaming: "streaming", done: "done", stopped: "stopped", error: "failed" }[s.status];
      const box = this.$(".error");
      box.hidden = !s.error;
      if (s.error) box.innerHTML = `<strong>${MD.esc(s.error.title)}</strong> ${MD.esc(s.error.message)}` +
        (s.error.detail ? `<code>${MD.esc(JSON.stringify(s.error.detail))}</code>` : "");
      this.metric("frames").textContent = s.frames;
      this.metric("frames").title = this.spec.stream ? `${s.events} SSE events in ${s.frames} network reads` : "network reads";
      this.metric("tokens").textContent = s.tokens;
      this.metric("tokens").title = "tokens of the answer shown" +
        (s.usage === null ? "" : `; the stream's usage says ${s.usage} completion tokens billed`);
      this.metric("heartbeats").textContent = s.heartbeats;
      const tpot = this.spec.stream && s.ttft !== null && s.tokens > 1 ? (s.lastText - s.ttft) / (s.tokens - 1) : null;
      this.setMetric("tpot", tpot === null ? (this.spec.stream ? "–" : "n/a") : fmtMs(tpot), tpot === null ? "" : grade(tpot, 0.08, 0.2));
      this.setMetric("e2e", s.end === null ? "–" : fmtS(s.end), "");
    }
    // Time-dependent readouts: a wait still going on counts up on the shared clock.
    const active = this.snaps.length && (s.status === "waiting" || s.status === "streaming");
    const ttft = s.ttft ?? (active ? null : undefined);
    this.setMetric("ttft", ttft === undefined ? "–" : ttft === null ? fmtS(t) + "…" : fmtS(ttft), ttft ? grade(ttft, 1, 10) : "pending");
    const feltAt = this.spec.stream ? s.ttft : s.end !== null && s.status === "done" ? s.end : null;
    if (feltAt !== null) this.setMetric("felt", fmtS(feltAt), grade(feltAt, 1, 10));
    else if (s.status === "error" || s.status === "stopped") this.setMetric("felt", s.end !== null ? fmtS(s.end) + " ✕" : "–", "bad");
    else this.setMetric("felt", active ? fmtS(t) + "…" : "–", "pending");
  }

  setMetric(name, text, cls) {
    const el = this.metric(name);
    if (el.textContent !== text) el.textContent = text;
    el.className = cls || "";
  }

  /** The frame timeline: one tick per network read; heartbeats, errors and TTFT marked. */
  drawTimeline(tMax, cursor) {
    const c = this.canvas, dpr = window.devicePixelRatio || 1;
    const w = c.clientWidth * dpr, h = c.clientHeight * dpr;
    if (c.width !== w || c.height !== h) { c.width = w; c.height = h; }
    const g = c.getContext("2d");
    const css = getComputedStyle(document.documentElement);
    const color = (v) => css.getPropertyValue(v).trim();
    g.clearRect(0, 0, w, h);
    g.fillStyle = color("--track");
    g.fillRect(0, h / 2 - dpr, w, 2 * dpr);
    const x = (t) => Math.min(w - dpr, (t / Math.max(tMax, 0.001)) * w);
    const style = { frame: ["--muted", 0.45], text: ["--accent", 0.8], hb: ["--amber", 1], err: ["--red", 1], stop: ["--amber", 1], end: ["--ink", 0.7],
      drop: ["--red", 1], resume: ["--green", 1] };
    for (const m of this.marks) {
      const [v, frac] = style[m.kind];
      g.fillStyle = color(v);
      g.globalAlpha = m.t > cursor ? 0.25 : 1;
      const hh = h * frac;
      g.fillRect(x(m.t), (h - hh) / 2, ["err", "stop", "hb", "drop", "resume"].includes(m.kind) ? 3 * dpr : Math.max(1, dpr), hh);
    }
    g.globalAlpha = 1;
    if (this.s.ttft !== null && this.s.ttft <= cursor) {
      g.fillStyle = color("--green");
      g.beginPath();
      g.moveTo(x(this.s.ttft), h);
      g.lineTo(x(this.s.ttft) - 5 * dpr, h - 7 * dpr);
      g.lineTo(x(this.s.ttft) + 5 * dpr, h - 7 * dpr);
      g.fill();
    }
    g.fillStyle = color("--ink");
    g.fillRect(x(cursor), 0, dpr, h);
  }
}

window.Panel = Panel;
