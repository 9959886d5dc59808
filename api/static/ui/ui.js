// The /ui dashboard: polls /metrics (cheap: no store iteration), /v1/topics and
// /v1/deadletters, and draws them. The API key lives in sessionStorage, sent as a
// Bearer header; it is never put in a URL.
"use strict";

const KEY_STORE = "timerstore-api-key";
const WINDOW_MS = 10 * 60 * 1000;
// Topic names are client input: 50,000 topics made 250,000 cells rebuilt on every
// refresh, about 2 s of the tab's main thread each time (it never caught up). The table
// shows one page of the topics with the most pending (then by name), in name order: 100,
// the page size every server allows (max_page_limit is at least that).
const MAX_TOPIC_ROWS = 100;
const params = new URLSearchParams(location.search);
const REFRESH_MS = Math.max(250, Number(params.get("refresh_ms")) || 2000);
const $ = id => document.getElementById(id);

// deadLetterTotal: the timerstore_dead_letters gauge, what "Purge all" deletes (the table
// holds the first 100 only: the confirmation said "100+" of 4,000)
const state = {
  history: [], prev: null, askedStats: false, deadletters: [], deadLetterTotal: null, timer: null,
};

class Unauthorized extends Error {}

// "." and ".." are valid names, but a browser resolves them (and %2E, %2E%2E) as dot
// segments of a URL: the replay of dead letter t/. went to /v1/deadletters/t/replay, the
// replay of every dead letter of t. Such names are left to the API (curl keeps %2E).
const DOTS_ONLY = /^\.{1,2}$/;
const DOTS_NOTE = "a name of only dots cannot be sent from a browser: use the API (escape the dots as %2E)";
function segment(name) {
  if (DOTS_ONLY.test(name)) throw new Error(`"${name}": ${DOTS_NOTE}`);
  return encodeURIComponent(name);
}

function dotsOnly(button, ...names) {
  if (!names.some(n => DOTS_ONLY.test(n))) return button;
  button.disabled = true;
  button.title = DOTS_NOTE;
  return button;
}

async function api(path, options = {}) {
  const headers = { ...(options.headers || {}) };
  const key = sessionStorage.getItem(KEY_STORE);
  if (key) headers.Authorization = "Bearer " + key;
  const response = await fetch(path, { ...options, headers });
  if (response.status === 401) throw new Unauthorized();
  if (!response.ok) {
    let message = response.status + " " + response.statusText;
    try { message = (await response.json()).error.message; } catch (e) { /* not JSON */ }
    throw new Error(message);
  }
  return response;
}

function parseMetrics(text) {
  const samples = [];
  for (const line of text.split("\n")) {
    if (!line || line[0] === "#") continue;
    const m = line.match(/^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/);
    if (!m) continue;
    const labels = {};
    for (const p of (m[2] || "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[p[1]] = p[2];
    samples.push({ name: m[1], labels, value: parseFloat(m[3]) });
  }
  return samples;
}

const pick = (samples, name) => samples.filter(s => s.name === name);
const one = (samples, name) => { const s = pick(samples, name)[0]; return s ? s.value : null; };
const total = (samples, name) => pick(samples, name).reduce((a, s) => a + s.value, 0);

function buckets(samples) {
  return pick(samples, "timerstore_delivery_lateness_seconds_bucket")
    .map(s => [s.labels.le === "+Inf" ? Infinity : parseFloat(s.labels.le), s.value])
    .sort((a, b) => a[0] - b[0]);
}

// The q-quantile (ms) of the observations between two cumulative bucket lists.
function quantileMs(q, before, after) {
  const deltas = after.map(([le, c], i) => [le, c - (before[i] ? before[i][1] : 0)]);
  const count = deltas.length ? deltas[deltas.length - 1][1] : 0;
  if (count <= 0) return null;
  const rank = q * count;
  let lower = 0, below = 0;
  for (const [le, c] of deltas) {
    if (c >= rank) {
      if (le === Infinity) return lower * 1000;
      return (lower + (le - lower) * (c > below ? (rank - below) / (c - below) : 1)) * 1000;
    }
    lower = le; below = c;
  }
  return lower * 1000;
}

function record(samples, nowMs) {
  const point = {
    t: nowMs,
    delivered: total(samples, "timerstore_timers_delivered_total"),
    buckets: buckets(samples),
    rate: null, p50: null, p99: null,
  };
  const prev = state.prev;
  if (prev) {
    const seconds = (nowMs - prev.t) / 1000;
    point.rate = seconds > 0 ? Math.max(0, point.delivered - prev.delivered) / seconds : null;
    point.p50 = quantileMs(0.5, prev.buckets, point.buckets);
    point.p99 = quantileMs(0.99, prev.buckets, point.buckets);
    state.history.push(point);
  }
  state.prev = point;
  state.history = state.history.filter(p => p.t >= nowMs - WINDOW_MS);
}

function drawCharts(samples, nowMs) {
  const h = state.history;
  // the x axis spans the history (10 s at least) up to the last 10 minutes
  const span = h.length ? nowMs - h[0].t : 0;
  const windowMs = Math.min(WINDOW_MS, Math.max(10000, span));
  Charts.line($("chart-rate"), [{ values: h.map(p => [p.t, p.rate]), color: "#2f9e44" }],
    windowMs, nowMs);
  Charts.line($("chart-lateness"), [
    { values: h.map(p => [p.t, p.p50]), color: "#2f7ed8" },
    { values: h.map(p => [p.t, p.p99]), color: "#d8572f" },
  ], windowMs, nowMs);
  const last = h[h.length - 1];
  $("rate-now").textContent = last && last.rate !== null ? `now ${last.rate.toFixed(1)}/s` : "";
  $("lateness-now").textContent = last && last.p99 !== null
    ? ` — last ${(REFRESH_MS / 1000).toFixed(1)} s: p50 ${last.p50.toFixed(1)} ms, p99 ${last.p99.toFixed(1)} ms`
    : "";
  const due = {};
  for (const s of pick(samples, "timerstore_pending_due_timers")) due[s.labels.due] = s.value;
  if (Object.keys(due).length) {
    Charts.bars($("chart-due"), [
      ["minute", (due.due_now || 0) + (due.lt_5s || 0) + (due.lt_1m || 0)],
      ["hour", due.lt_1h || 0], ["day", due.lt_1d || 0], ["later", due.later || 0],
    ], "#5b6fd8");
    const at = one(samples, "timerstore_stats_snapshot_timestamp_seconds");
    const uncounted = due.uncounted
      ? `; ${Charts.formatNumber(due.uncounted)} more not counted (housekeeping.stats_count_cap)` : "";
    $("due-when").textContent = at ? "counted " + new Date(at * 1000).toLocaleTimeString() + uncounted : "";
  } else if (!state.askedStats) {
    state.askedStats = true;  // no snapshot yet: /v1/stats counts one now
    api("/v1/stats").catch(() => {});
  }
}

function drawEngine(samples, nowMs) {
  const seconds = v => !v ? "-" : new Date(v * 1000).toISOString().replace(".000", "");
  const lag = one(samples, "timerstore_scan_cursor_lag_seconds");
  state.deadLetterTotal = one(samples, "timerstore_dead_letters");
  const rows = [
    ["pending", Charts.formatNumber(total(samples, "timerstore_pending_timers"))],
    ["in flight", one(samples, "timerstore_in_flight_timers")],
    ["delivery queue", `${one(samples, "timerstore_delivery_queue_depth_timers")} / ${one(samples, "timerstore_delivery_queue_capacity_timers")}`],
    ["scan cursor lag", lag === null ? "-" : lag.toFixed(3) + " s"],
    ["dead letters", state.deadLetterTotal],
    ["oldest pending due", seconds(one(samples, "timerstore_oldest_pending_due_timestamp_seconds"))],
    ["watermark", seconds(one(samples, "timerstore_watermark_timestamp_seconds"))],
  ];
  const table = $("engine");
  table.replaceChildren(...rows.map(([k, v]) => {
    const tr = document.createElement("tr");
    tr.append(cell(k), cell(v === null ? "-" : String(v), "num"));
    return tr;
  }));
  const store = pick(samples, "timerstore_store_info")[0];
  $("store").textContent = store ? "store: " + store.labels.store : "";
}

function cell(text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

function button(text, cls, onClick) {
  const b = document.createElement("button");
  b.type = "button"; b.textContent = text; b.className = cls;
  b.addEventListener("click", onClick);
  return b;
}

// one page of the topics with the most pending (the server orders them), shown by name
function drawTopics(page) {
  const shown = [...page.topics].sort((a, b) => (a.topic < b.topic ? -1 : a.topic > b.topic ? 1 : 0));
  const hidden = page.total - shown.length;
  $("topics-more").textContent = hidden > 0
    ? `${hidden} more topics not shown (these are the ${shown.length} with the most pending; GET /v1/topics pages through every one)`
    : "";
  $("topics").tBodies[0].replaceChildren(...shown.map(t => {
    const tr = document.createElement("tr");
    const lag = t.groups.length ? t.groups.map(g => `${g.group}: ${g.lag}`).join(", ") : "-";
    tr.append(cell(t.topic), cell(String(t.pending), "num"), cell(String(t.log_end_offset), "num"),
      cell(t.sink), cell(lag));
    return tr;
  }));
}

function drawDeadLetters(page) {
  state.deadletters = page.timers;
  const total = state.deadLetterTotal;
  $("dl-count").textContent = total !== null && (page.next_cursor || total > page.timers.length)
    ? `(${total}, the first ${page.timers.length} below)`
    : `(${page.timers.length}${page.next_cursor ? "+" : ""})`;
  $("deadletters").tBodies[0].replaceChildren(...page.timers.map(t => {
    const tr = document.createElement("tr");
    tr.dataset.topic = t.topic; tr.dataset.id = t.id;
    const replay = dotsOnly(button("Replay", "replay", () => act(
      api(`/v1/deadletters/${segment(t.topic)}/${segment(t.id)}/replay`, { method: "POST" }),
      `replayed ${t.topic}/${t.id}`)), t.topic, t.id);
    tr.append(cell(t.topic), cell(t.id), cell(String(t.attempts), "num"), cell(t.last_error || ""));
    const td = document.createElement("td"); td.append(replay); tr.append(td);
    return tr;
  }));
  const topics = [...new Set(page.timers.map(t => t.topic))].sort();
  $("dl-topics").replaceChildren(...topics.map(topic => {
    const b = dotsOnly(button(`Replay all of ${topic}`, "replay-topic", () => act(
      api(`/v1/deadletters/${segment(topic)}/replay`, { method: "POST" })
        .then(r => r.json()).then(body => body.replayed),
      n => `replayed ${n} dead letters of ${topic}`)), topic);
    b.dataset.topic = topic;
    return b;
  }));
  $("dl-purge").disabled = page.timers.length === 0;
}

async function act(promise, message) {
  try {
    const result = await promise;
    $("dl-message").textContent = typeof message === "function" ? message(result) : message;
  } catch (e) {
    if (e instanceof Unauthorized) return showLogin();
    $("dl-message").textContent = "failed: " + e.message;
  }
  refresh();
}

async function refresh() {
  clearTimeout(state.timer);
  try {
    const text = await (await api("/metrics")).text();
    const nowMs = Date.now();
    const samples = parseMetrics(text);
    record(samples, nowMs);
    drawCharts(samples, nowMs);
    drawEngine(samples, nowMs);
    drawTopics(await (await api(`/v1/topics?order=pending&limit=${MAX_TOPIC_ROWS}`)).json());
    drawDeadLetters(await (await api("/v1/deadletters?limit=100")).json());
    $("status").textContent = "updated " + new Date(nowMs).toLocaleTimeString();
    state.timer = setTimeout(refresh, REFRESH_MS);
  } catch (e) {
    if (e instanceof Unauthorized) return showLogin();
    $("status").textContent = "error: " + e.message;
    state.timer = setTimeout(refresh, REFRESH_MS);
  }
}

function showLogin() {
  clearTimeout(state.timer);
  $("login").hidden = false;
  $("login-error").textContent = sessionStorage.getItem(KEY_STORE) ? "that key was refused" : "";
  $("status").textContent = "an API key is required";
  $("login-key").focus();
}

$("login").addEventListener("submit", event => {
  event.preventDefault();
  sessionStorage.setItem(KEY_STORE, $("login-key").value.trim());
  $("login-key").value = "";
  $("login").hidden = true;
  refresh();
});

$("dl-purge").addEventListener("click", () => {
  const total = state.deadLetterTotal;
  $("dl-confirm-count").textContent = total !== null && total >= state.deadletters.length
    ? String(total)
    : String(state.deadletters.length) + ($("dl-count").textContent.includes("+") ? "+" : "");
  $("dl-confirm").hidden = false;
});
$("dl-purge-no").addEventListener("click", () => { $("dl-confirm").hidden = true; });
$("dl-purge-yes").addEventListener("click", () => {
  $("dl-confirm").hidden = true;
  act(api("/v1/deadletters", { method: "DELETE" }).then(r => r.json()).then(b => b.purged),
    n => `purged ${n} dead letters`);
});

$("lookup").addEventListener("submit", async event => {
  event.preventDefault();
  const topic = $("lookup-topic").value.trim(), id = $("lookup-id").value.trim();
  const out = $("lookup-result");
  try {
    const r = await api(`/v1/timers/${segment(topic)}/${segment(id)}`);
    const timer = await r.json();
    out.dataset.state = timer.state;
    out.textContent = JSON.stringify(timer, null, 2);
  } catch (e) {
    if (e instanceof Unauthorized) return showLogin();
    out.dataset.state = "";
    out.textContent = e.message;
  }
});

refresh();
