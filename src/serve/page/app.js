// The page of `ralph serve`. It reads /api/status (the document `ralph
// status --json` prints), /api/run, /api/history and /api/report (what
// `ralph history --json` and `ralph report --json` print), and follows
// /events: the run's events as `--json` prints them, and `status` whenever
// the status changed.
// Everything shown is text: nothing from the project or the agent is ever
// parsed as HTML.
"use strict";

const token = new URLSearchParams(location.search).get("token");
const q = (path) => (token ? path + (path.includes("?") ? "&" : "?") + "token=" + encodeURIComponent(token) : path);
const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

const usd = (n) => "$" + (Number(n) || 0).toFixed(2);
// An estimated cost (from `cost.prices`, the CLI reported none) reads "~$1.23".
const cost = (n, estimated) => (estimated ? "~" : "") + usd(n);
function tokens(n) {
  n = Number(n) || 0;
  return n < 10000 ? String(n) : n < 1e7 ? Math.floor(n / 1000) + "k" : (n / 1e6).toFixed(1) + "M";
}
const percent = (r) => (r === null || r === undefined ? "–" : Math.round(r * 100) + "%");
function clock(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
  return (h ? h + "h " : "") + (h || m ? String(m).padStart(h ? 2 : 1, "0") + "m " : "") + String(r).padStart(2, "0") + "s";
}

// A length of time as `ralph report` writes it: "850ms", "12.3s", "3m 05s".
const dur = (ms) => (ms < 1000 ? Math.round(ms) + "ms" : ms < 60000 ? (ms / 1000).toFixed(1) + "s" : clock(ms));

// What the events told about the run being followed.
const live = {
  run: null,          // run id of run_start
  iteration: null,    // the latest {iteration, story, title, since, worker, result}
  running: new Map(), // per worker ("" for a single loop): its iteration under way
  lines: [],          // the agent's latest lines: {key, text}
  cost: 0,            // cost of the iterations that ended in this run
  blocked: new Map(), // story → why, from the events
  waiting: null,      // {reason, until}
  ended: null,        // the run_end event
  budget: null,       // the run's budgets, from its run_start
  started: null,      // when this process of the run started
  parallel: false,    // workers were seen
};
let status = null;
let runDoc = null;
const MAX_LINES = 14;

function storyState(s) {
  if (s.passes) return "verified";
  const cur = status.current_run;
  const running = status.running_pid != null;
  if (s.worker != null) return "running";
  if (running && cur && cur.story === s.id && (cur.phase === "agent" || cur.phase === "gate")) return "running";
  if (status.parallel && status.parallel.given_up && s.id in status.parallel.given_up) return "blocked";
  if (cur && cur.outcome === "blocked" && cur.story === s.id) return "blocked";
  if (live.blocked.has(s.id) && !running) return "blocked";
  return "waiting";
}

function renderStatus() {
  if (!status) return;
  document.title = "ralph · " + (status.project || "project");
  $("project").textContent = status.project || "ralph";
  $("branch").textContent = status.branch ? "on " + status.branch : "";
  $("passing").textContent = status.passing + "/" + status.total + " verified";
  const cur = status.current_run;
  const running = status.running_pid != null;
  let summary = running ? "running (pid " + status.running_pid + ")" : "not running";
  if (cur) {
    summary += " · run " + cur.run_id + " · iteration " + cur.iteration + "/" + cur.max_iterations + " · " + usd(cur.cost_usd);
    if (cur.outcome) summary += " · ended: " + cur.outcome.replace(/_/g, " ");
  }
  $("summary").textContent = summary;
  $("run-id").textContent = cur ? cur.run_id : "";

  const cols = { waiting: [], running: [], verified: [], blocked: [] };
  for (const s of status.stories) {
    const state = storyState(s);
    const why = [];
    if (state === "waiting" && s.waiting_on && s.waiting_on.length) why.push("waits on " + s.waiting_on.join(", "));
    if (state === "waiting" && s.next) why.push("next");
    if (state === "running" && s.worker != null) why.push("worker " + s.worker);
    if (state === "blocked") {
      const given = status.parallel && status.parallel.given_up && status.parallel.given_up[s.id];
      const text = given || live.blocked.get(s.id) || (cur && cur.story === s.id && cur.message) || "";
      if (text) why.push(text.split("\n")[0]);
    }
    cols[state].push(el("li", { class: "story", "data-story": s.id, "data-state": state, title: s.title },
      el("b", {}, s.id), " " + s.title,
      why.length ? el("span", { class: "why" }, why.join(" · ")) : null));
  }
  for (const [k, items] of Object.entries(cols)) $("col-" + k).replaceChildren(...items);

  const c = status.circuit;
  const rows = [
    ["breaker", el("span", { class: "state-" + c.state }, c.state + (c.reason && c.reason !== "new" ? " — " + c.reason : ""))],
    ["without progress", String(c.iterations_without_progress)],
    ["calls this hour", status.calls_this_hour + (status.calls_per_hour ? " of " + status.calls_per_hour : " (no limit)")],
  ];
  if (status.usage_limit_until) rows.push(["usage limit", "calls resume at " + new Date(status.usage_limit_until).toLocaleString()]);
  if (live.waiting && new Date(live.waiting.until) > new Date())
    rows.push(["waiting", live.waiting.reason + " · until " + new Date(live.waiting.until).toLocaleTimeString()]);
  // The run's own budgets once its run_start was seen; else the configured ones.
  const b = live.budget || (runDoc && runDoc.budget) || {};
  const r = runDoc && runDoc.run;
  rows.push(["cost", usd(cur ? cur.cost_usd : 0) + (b.max_cost_usd ? " of " + usd(b.max_cost_usd) : " (no budget)")]);
  if (r && r.tokens) rows.push(["tokens", r.tokens + (b.max_tokens ? " of " + b.max_tokens : "")]);
  else if (b.max_tokens) rows.push(["tokens", "0 of " + b.max_tokens]);
  if (running && live.started) {
    const used = Date.now() - live.started + (r ? r.elapsed_ms_before || 0 : 0);
    rows.push(["run time", clock(used) + (b.max_duration_s ? " of " + clock(b.max_duration_s * 1000) : "")]);
  } else if (b.max_duration_s) rows.push(["duration budget", clock(b.max_duration_s * 1000)]);
  rows.push(["iterations", (cur ? cur.iteration : 0) + " of " + (cur ? cur.max_iterations : (runDoc && runDoc.budget ? runDoc.budget.max_iterations : "?"))]);
  if (status.cannot_start) rows.push(["cannot start", status.cannot_start.split("\n")[0]]);
  // Pull requests as ralph last saw them (`ralph deliver` asks the forge again).
  for (const pr of status.pull_requests || []) {
    const ci = pr.ci ? " · CI " + pr.ci : "";
    rows.push(["PR " + (pr.story || "run"), el("a", { href: pr.url, class: "pr-" + pr.state, target: "_blank", rel: "noopener" },
      "#" + pr.number + " " + pr.state + (pr.draft ? " (draft)" : "") + ci)]);
  }
  for (const w of status.warnings || []) rows.push(["warning", w]);
  $("health-list").replaceChildren(...rows.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  for (const a of c.advice || []) $("health-list").append(el("dt", {}, ""), el("dd", { class: "muted" }, a));

  renderRunEnd();
  renderLive();
}

function renderRunEnd() {
  const end = live.ended;
  const last = status && status.last_run;
  let text = "";
  if (end) text = "ended: " + end.outcome.replace(/_/g, " ") + " after " + end.iterations + " iteration(s) · " +
    end.passing + "/" + end.stories + " pass · " + usd(end.cost_usd) + " · exit " + end.exit_code +
    (end.message ? " — " + end.message.split("\n")[0] : "");
  else if (last) text = "last run " + last.run_id + ": " + String(last.outcome || "").replace(/_/g, " ") +
    " · " + last.passing + "/" + last.stories + " pass · exit " + last.exit_code;
  $("run-end").textContent = text;
}

// The run's report (/api/report): per story, and its totals.
let report = null;
function renderReport() {
  const stories = report ? report.stories : [];
  $("report").hidden = !stories.length;
  $("report-rows").replaceChildren(...stories.map((s) => {
    const failed = s.gates.filter((g) => !g.passed).length;
    const gates = s.gates.length ? s.gates.length - failed + " passed" + (failed ? ", " + failed + " failed" : "") : "–";
    const notes = [...s.lessons.map((l) => "lesson: " + l), s.note].filter(Boolean).join(" · ");
    return el("tr", { "data-report": s.id },
      el("td", {}, s.id + " " + s.title),
      el("td", {}, String(s.attempts) + (s.resolves ? " + " + s.resolves + " resolving" : "")),
      el("td", {}, s.first_pass ? "yes" : "no"),
      el("td", {}, s.verified === null || s.verified === undefined ? "–" : s.verified ? "yes" : "no"),
      el("td", {}, dur(s.wall_ms)), el("td", {}, dur(s.agent_ms)),
      el("td", {}, tokens(s.tokens_in) + " / " + tokens(s.tokens_out)),
      el("td", { class: s.cost_estimated ? "est" : "" }, cost(s.cost_usd, s.cost_estimated)),
      el("td", {}, gates), el("td", { title: s.commit || "" }, (s.commit || "").slice(0, 10)),
      el("td", {}, notes));
  }));
  const t = report && report.totals;
  $("report-totals").textContent = !t ? "" :
    "total " + cost(t.cost_usd, t.cost_estimated) + " · " + tokens(t.tokens_in) + " in / " + tokens(t.tokens_out) + " out · " +
    (t.cost_per_delivered_story === null || t.cost_per_delivered_story === undefined ? "no story delivered" :
      cost(t.cost_per_delivered_story, t.cost_estimated) + " per delivered story") +
    " · first pass " + percent(t.first_pass_rate) + " · waited out limits " + dur(t.waited_ms) +
    " · retries and back-offs " + dur(t.retried_ms) + (t.cost_estimated ? " · ~ estimated from cost.prices" : "");
}

// The recorded runs (/api/history), newest first.
function renderHistory(rows) {
  $("history").hidden = !rows.length;
  $("history-rows").replaceChildren(...rows.slice().reverse().map((r) => el("tr", { "data-run": r.run_id },
    el("td", {}, r.run_id), el("td", {}, r.started_at ? new Date(r.started_at).toLocaleString() : "?"),
    el("td", {}, dur(r.duration_ms)),
    el("td", {}, r.outcome ? r.outcome.replace(/_/g, " ") + (r.why ? " — " + r.why.split("\n")[0] : "") : "running"),
    el("td", {}, String(r.iterations)), el("td", {}, r.verified + "/" + r.stories),
    el("td", { class: r.cost_estimated ? "est" : "" }, cost(r.cost_usd, r.cost_estimated)),
    el("td", {}, tokens(r.tokens_in) + " / " + tokens(r.tokens_out)),
    el("td", {}, [r.tool || r.agent || "?", r.model].filter(Boolean).join(" · ")))));
}

function renderLive() {
  const running = status && status.running_pid != null;
  const now = [...live.running.values()];
  if (now.length && running) {
    const cost = status.current_run ? status.current_run.cost_usd : live.cost;
    $("live-head").textContent = now.map((it) => "iteration " + it.iteration + " · " + it.story + " " + (it.title || "") +
      (it.worker != null ? " · worker " + it.worker : "") + " · " + clock(Date.now() - it.since)).join("\n") +
      " · " + usd(cost) + " so far";
    $("live-head").className = "";
  } else {
    const it = live.iteration;
    $("live-head").textContent = it ? "last iteration: " + it.iteration + " · " + it.story + (it.result ? " · " + it.result.replace(/_/g, " ") : "") : "no iteration running";
    $("live-head").className = "muted";
  }
  const pre = $("live-lines");
  pre.textContent = live.lines.map((l) => l.text).join("\n");
  pre.scrollTop = pre.scrollHeight;
}

function renderLogs() {
  if (!runDoc || !runDoc.run) { $("log-list").replaceChildren(el("li", { class: "muted" }, "no run yet")); return; }
  const run = runDoc.run.run_id;
  $("log-list").replaceChildren(...runDoc.logs.map((f) =>
    el("li", {}, el("a", { href: q("/logs/" + run + "/" + f), target: "_blank", rel: "noopener" }, f))));
}

let eventTs = null;
function addEvent(text, warn) {
  const list = $("event-list");
  const at = eventTs ? new Date(eventTs) : new Date();
  list.prepend(el("li", { class: warn ? "warn" : "" }, at.toLocaleTimeString() + "  " + text));
  while (list.children.length > 200) list.lastChild.remove();
}

// One event of the run, as `--json` prints it.
function onEvent(e) {
  eventTs = e.ts;
  const who = e.worker != null ? "[w" + e.worker + " " + e.story + "] " : "";
  const key = e.worker != null ? String(e.worker) : "";
  switch (e.event) {
    case "run_start":
      Object.assign(live, { run: e.run_id, iteration: null, running: new Map(), lines: [], cost: 0, blocked: new Map(), waiting: null, ended: null,
        budget: e.budget || {}, started: Date.parse(e.ts) || null, parallel: false });
      addEvent("run " + e.run_id + " started · agent " + e.agent + " · " + e.passing + "/" + e.stories + " pass");
      break;
    case "iteration_start":
      live.iteration = { iteration: e.iteration, story: e.story || e.story_id, title: e.story_title, since: Date.parse(e.ts) || Date.now(), worker: e.worker };
      live.running.set(key, live.iteration);
      // A new iteration's lines replace its worker's last ones; the other workers' stay.
      live.lines = live.lines.filter((l) => l.key !== key);
      addEvent(who + "iteration " + e.iteration + " · " + e.story_id + " " + e.story_title);
      break;
    case "agent_output":
      for (const line of String(e.text).split("\n")) live.lines.push({ key, text: who + line });
      live.lines = live.lines.slice(-MAX_LINES);
      break;
    case "iteration_end":
      live.cost += e.cost_usd || 0;
      if (live.running.has(key)) live.running.get(key).result = e.result;
      live.running.delete(key);
      addEvent(who + "iteration " + e.iteration + " · " + e.story_id + " · " + e.result.replace(/_/g, " ") +
        (e.cost_usd ? " · " + usd(e.cost_usd) : "") + (e.error ? " · " + e.error.split("\n")[0] : ""), e.result !== "progress");
      break;
    case "gate":
      addEvent(who + "gate " + (e.passed ? "passed" : "failed") + " · " + e.story_id + (e.summary ? " · " + e.summary.split("\n")[0] : ""), !e.passed);
      break;
    case "circuit":
      addEvent("breaker " + e.from + " → " + e.to + " · " + e.reason, e.to !== "CLOSED");
      break;
    case "waiting":
      live.waiting = { reason: e.reason, until: e.until };
      addEvent("waiting: " + e.reason + " (" + clock(e.seconds * 1000) + ")", true);
      break;
    case "worker_start":
      live.parallel = true;
      addEvent("worker " + e.worker + " · " + e.story_id + " " + e.story_title + (e.attempt > 1 ? " · attempt " + e.attempt : ""));
      break;
    case "worker_end":
      if (/given up|blocked/i.test(e.outcome)) live.blocked.set(e.story_id, e.message || e.outcome);
      addEvent("worker " + e.worker + " · " + e.story_id + " · " + e.outcome);
      break;
    case "merge":
      if (e.result === "blocked") live.blocked.set(e.story_id, e.message);
      addEvent("merge " + e.story_id + " · " + e.result.replace(/_/g, " "), e.result !== "merged");
      break;
    case "notice":
      addEvent(who + e.message.split("\n")[0], e.level === "warn");
      break;
    case "run_end":
      live.ended = e;
      live.waiting = null;
      // One loop stops at its blocked story; a parallel run named its own in worker_end.
      if (e.outcome === "blocked" && live.iteration && !live.parallel) live.blocked.set(live.iteration.story, e.message);
      addEvent("run ended: " + e.outcome.replace(/_/g, " ") + " · exit " + e.exit_code, e.exit_code !== 0);
      break;
  }
}

let pendingRender = false;
function scheduleRender() {
  if (pendingRender) return;
  pendingRender = true;
  setTimeout(() => { pendingRender = false; renderStatus(); }, 50);
}

async function refreshRun() {
  try {
    const r = await fetch(q("/api/run"));
    if (r.ok) { runDoc = await r.json(); renderLogs(); scheduleRender(); }
  } catch (_) { /* the stream reconnects; the next status refreshes */ }
}

async function loadHistory() {
  try {
    const r = await fetch(q("/api/history"));
    if (r.ok) renderHistory(await r.json());
  } catch (_) { /* the next run's end asks again */ }
}

async function loadReport() {
  try {
    const r = await fetch(q("/api/report" + (live.run ? "?run=" + encodeURIComponent(live.run) : "")));
    report = r.ok ? await r.json() : null;
    renderReport();
  } catch (_) { /* the next event asks again */ }
}

// The report and history are read again after what changes them, at most
// once a second however many events come.
let reload = null;
function scheduleReload(history) {
  if (reload) { reload.history = reload.history || history; return; }
  reload = { history };
  setTimeout(() => {
    const both = reload.history;
    reload = null;
    loadReport();
    if (both) loadHistory();
  }, 1000);
}

function connect() {
  const es = new EventSource(q("/events"));
  es.onopen = () => { $("conn").textContent = "live"; $("conn").className = "conn on"; };
  es.onerror = () => { $("conn").textContent = "reconnecting…"; $("conn").className = "conn off"; };
  es.addEventListener("status", (m) => { status = JSON.parse(m.data); scheduleRender(); refreshRun(); });
  es.onmessage = (m) => {
    let e;
    try { e = JSON.parse(m.data); onEvent(e); } catch (_) { return; }
    if (e.event === "run_start" || e.event === "run_end") scheduleReload(true);
    else if (e.event === "iteration_end" || e.event === "merge" || e.event === "worker_end") scheduleReload(false);
    scheduleRender();
  };
}

async function start() {
  try {
    const r = await fetch(q("/api/status"));
    if (r.ok) status = await r.json();
  } catch (_) { /* the stream sends it too */ }
  await refreshRun();
  renderStatus();
  connect();
  loadHistory();
  loadReport();
  setInterval(scheduleRender, 1000);
}

start();
