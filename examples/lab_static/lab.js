// The lab page: three panels on one clock, a scenario picker, a scrubber to replay any instant, a log.
"use strict";

const PANELS = [
  { id: "buffered", title: "Non-streaming", subtitle: "Waits for the whole answer; one JSON response.",
    url: "/raw/v1/chat/completions", stream: false },
  { id: "raw", title: "Streaming, raw", subtitle: "One SSE event per token; no middleware.",
    url: "/raw/v1/chat/completions", stream: true },
  { id: "mw", title: "Streaming + StreamingMiddleware", subtitle: "One line added: coalesced, kept alive, safe errors, resumable.",
    url: "/mw/v1/chat/completions", stream: true },
];
const LOG_LIMIT = 300;
const $ = (id) => document.getElementById(id);

const lab = {
  scenarios: [],
  scenario: null,
  panels: [],
  running: false,
  t0: 0,
  tEnd: 0,
  cursor: 0,     // the time shown, on the shared clock
  live: true,    // follow the clock, or show the scrubber's instant
  replaying: false,
  controller: null,
  logItems: [],
};

function log(t, panel, kind, text) {
  const li = document.createElement("li");
  li.className = `log-${kind}`;
  li.dataset.t = t;
  li.innerHTML = `<span class="t">${t.toFixed(2)} s</span><span class="who who-${panel}">${panel}</span><span class="what"></span>`;
  li.querySelector(".what").textContent = text;
  const list = $("log");
  list.appendChild(li);
  lab.logItems.push(li);
  while (lab.logItems.length > LOG_LIMIT) lab.logItems.shift().remove();
  list.scrollTop = list.scrollHeight;
}

function selectScenario(name) {
  lab.scenario = lab.scenarios.find((s) => s.name === name) || lab.scenarios[0];
  for (const b of document.querySelectorAll("#scenarios button")) b.setAttribute("aria-checked", b.dataset.name === lab.scenario.name);
  $("ttft").value = lab.scenario.ttft;
  $("tpot").value = Math.round(lab.scenario.tpot * 1000);
  $("jitter").value = Math.round(lab.scenario.jitter * 100);
  $("scenario-help").textContent = lab.scenario.description;
}

/** Show every panel (and the log) as it was at time t. */
function showAt(t) {
  lab.cursor = t;
  const tMax = Math.max(lab.running ? (performance.now() - lab.t0) / 1000 : lab.tEnd, 0.5);
  for (const p of lab.panels) {
    p.render(t);
    p.drawTimeline(tMax, t);
  }
  $("clock").textContent = `${t.toFixed(2)} s`;
  for (const li of lab.logItems) li.classList.toggle("future", Number(li.dataset.t) > t + 1e-9);
  if (!lab.running && lab.tEnd > 0) {
    $("scrub").value = Math.round((t / lab.tEnd) * 1000);
    $("scrub-time").textContent = lab.live ? `end · ${lab.tEnd.toFixed(2)} s` : `${t.toFixed(2)} s / ${lab.tEnd.toFixed(2)} s`;
  }
}

function tick() {
  if (!lab.running) return;
  showAt((performance.now() - lab.t0) / 1000);
  requestAnimationFrame(tick);
}

async function run() {
  if (lab.running) return;
  lab.running = true;
  lab.live = true;
  lab.replaying = false;
  document.body.dataset.run = "running";
  $("run").disabled = true;
  $("stop").disabled = false;
  $("scrub").disabled = true;
  $("replay").disabled = true;
  $("scrub-time").textContent = "live";
  $("log").textContent = "";
  lab.logItems = [];
  for (const p of lab.panels) p.reset();
  const body = {
    model: "lab-sim",
    messages: [{ role: "user", content: `Scenario: ${lab.scenario.label}` }],
    stream_options: { include_usage: true },
    scenario: lab.scenario.name,
    ttft: Number($("ttft").value),
    tpot: Number($("tpot").value) / 1000,
    jitter: Number($("jitter").value) / 100,
    seed: Math.floor(Math.random() * 2 ** 31), // the same seed for all three: the same token timing
  };
  lab.controller = new AbortController();
  lab.t0 = performance.now();
  log(0, "all", "start", `${lab.scenario.label}: TTFT ${body.ttft} s, TPOT ${Math.round(body.tpot * 1000)} ms ± ${Math.round(body.jitter * 100)} %`);
  requestAnimationFrame(tick);
  // A network drop: a fraction of the way through the planned answer, on the shared clock.
  const sc = lab.scenario;
  const drop = sc.drop_at === null ? null : { at: body.ttft + sc.drop_at * sc.tokens * body.tpot, offline: sc.offline };
  // The guarded scenario asks the middleware for the lab's guard (the raw app ignores the header).
  const extra = sc.guarded ? { "X-Lab-Guard": "1" } : {};
  await Promise.allSettled(lab.panels.map((p) => p.run(body, lab.t0, lab.controller.signal, drop, extra)));
  lab.tEnd = Math.max(...lab.panels.map((p) => p.s.end ?? 0));
  lab.running = false;
  document.body.dataset.run = "finished";
  $("run").disabled = false;
  $("stop").disabled = true;
  $("scrub").disabled = false;
  $("replay").disabled = false;
  showAt(lab.tEnd);
}

function replay() {
  if (lab.replaying) { lab.replaying = false; $("replay").innerHTML = "&#9654; Replay"; return; }
  lab.replaying = true;
  lab.live = false;
  $("replay").innerHTML = "&#10074;&#10074; Pause";
  const from = lab.cursor >= lab.tEnd - 0.01 ? 0 : lab.cursor;
  const start = performance.now() - from * 1000;
  const step = () => {
    if (!lab.replaying) return;
    const t = Math.min(lab.tEnd, (performance.now() - start) / 1000);
    showAt(t);
    if (t >= lab.tEnd) { lab.replaying = false; lab.live = true; $("replay").innerHTML = "&#9654; Replay"; showAt(t); return; }
    requestAnimationFrame(step);
  };
  requestAnimationFrame(step);
}

async function init() {
  const config = await (await fetch("/api/config")).json();
  lab.scenarios = config.scenarios;
  const box = $("scenarios");
  for (const s of lab.scenarios) {
    const b = document.createElement("button");
    b.type = "button";
    b.setAttribute("role", "radio");
    b.dataset.name = s.name;
    b.textContent = s.label;
    b.title = s.description;
    b.addEventListener("click", () => !lab.running && selectScenario(s.name));
    box.appendChild(b);
  }
  const st = config.settings;
  $("settings-note").textContent = `middleware: heartbeat after ${st.heartbeat_interval} s of silence, ` +
    (st.coalesce ? `coalescing window ${Math.round(st.coalesce_max_delay * 1000)} ms` : "coalescing off") +
    (st.resume ? ", resumable (Last-Event-ID)" : "");
  const template = $("panel-template");
  for (const spec of PANELS) {
    const root = template.content.firstElementChild.cloneNode(true);
    $("panels").appendChild(root);
    lab.panels.push(new Panel(root, spec, log));
  }
  selectScenario(new URLSearchParams(location.search).get("scenario") || "report");
  $("run").addEventListener("click", run);
  $("stop").addEventListener("click", () => lab.controller?.abort());
  $("replay").addEventListener("click", replay);
  $("scrub").addEventListener("input", (e) => {
    lab.replaying = false;
    $("replay").innerHTML = "&#9654; Replay";
    lab.live = Number(e.target.value) >= 1000;
    showAt((Number(e.target.value) / 1000) * lab.tEnd);
  });
  window.addEventListener("resize", () => showAt(lab.cursor));
  document.body.dataset.run = "ready";
  showAt(0);
  if (new URLSearchParams(location.search).has("autorun")) run();
}

window.lab = lab;
init();
