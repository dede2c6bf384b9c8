// Boreas web UI at scale: the overview (nodes and queries with box counts and rates), the search, and the
// scope: which one graph the topology view draws (app.js draws it).
//
// A small catalog (at most FULL_LIMIT boxes) comes whole over the feed and is drawn whole, as it always was.
// A large one does not: the page opens on the overview (GET ui/overview), finds names on the Head as the
// user types (GET ui/search), and draws one query's, node's or stream's graph, or a box and its neighbours,
// on demand (GET ui/graph); the feed then sends only changes, and the page applies those to what it holds.
"use strict";

const FULL_LIMIT = 300;      // boxes: up to this many the page holds and draws the whole catalog
const LIST_LIMIT = 200;      // rows of the overview's lists (the search finds the rest)
const RECENT_LIMIT = 256;    // change messages kept to replay over a graph read at an older version

async function start() {
  const search = document.getElementById("search");
  let typed = null;
  search.addEventListener("input", () => {  // results as the user types, asked of the Head
    clearTimeout(typed);
    typed = setTimeout(() => runSearch(search.value), 120);
  });
  search.addEventListener("keydown", (event) => {
    if (event.key !== "Enter") return;
    event.preventDefault();
    const first = document.querySelector("#search-results li[data-kind]");
    if (first) first.click();
  });
  document.getElementById("scope-close").addEventListener("click", () => setScope(null));
  document.getElementById("show-all").addEventListener("click", () => setScope({kind: "all"}));
  while (!state.overview) {  // how big the catalog is decides how the page follows it
    try {
      state.overview = await getJson("ui/overview");
    } catch (err) {  // the Head is starting or restarting: try again
      setConnected(false);
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
  state.full = state.overview.boxes <= FULL_LIMIT;
  state.scope = state.full ? {kind: "all"} : null;
  renderOverview();
  connect();
  poll();
}

// -- the overview ------------------------------------------------------------------------------

let overviewPending = null;
function scheduleOverview() {  // after changes: counts again, at most once a second
  if (overviewPending) return;
  overviewPending = setTimeout(async () => {
    try {
      state.overview = await getJson("ui/overview");
      scheduleRender();
    } catch (err) {
      // the Head is unreachable: the connection badge says so
    } finally {
      overviewPending = null;
    }
  }, 1000);
}

// A stream's rate, tuples per second: where it enters a node, else where a node routes it.
function streamRate(stream) {
  const nodes = state.stats ? Object.values(state.stats.nodes) : [];
  let best = null;
  for (const ns of nodes) {
    const v = (ns.streams_in || {})[stream] ?? (ns.streams_routed || {})[stream];
    if (typeof v === "number") best = Math.max(best ?? 0, v);
  }
  return best;
}

function sumRates(streams) {
  const rates = streams.map(streamRate).filter((r) => r !== null);
  return rates.length ? rates.reduce((a, b) => a + b, 0) : null;
}

function renderOverview() {
  const o = state.overview;
  const summary = document.getElementById("overview-summary");
  if (!o) {
    summary.textContent = "reading the catalog…";
    return;
  }
  const rows = new Map(state.nodes.map((n) => [n.endpoint, n]));
  const lists = JSON.stringify([o, state.scope, state.full, o.nodes.map((n) => nodeStatus(n.endpoint, rows.get(n.endpoint)))]);
  if (lists !== shownOverview) {  // rebuilt only when what it lists changed (a click is not lost mid-way)
    shownOverview = lists;
    renderLists(o);
  }
  renderCounts(o);  // the rates change every second: written into the rows in place
  renderScopeTitle();
}

const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;

function renderCounts(o) {
  const queries = new Map(o.queries.map((q) => [q.name, q]));
  for (const li of document.querySelectorAll("#query-list li[data-query]")) {
    const q = queries.get(li.dataset.query);
    const rin = sumRates(q.inputs), rout = sumRates(q.outputs);
    const rates = rin === null && rout === null ? "" : ` · in ${fmt(rin)} · out ${fmt(rout)} tuples/s`;
    li.querySelector(".counts").textContent = `${plural(q.boxes, "box", "boxes")} · ` +
      `${plural(q.nodes.length, "node", "nodes")}${rates}`;
  }
  const boxes = new Map(o.nodes.map((n) => [n.endpoint, n.boxes]));
  for (const li of document.querySelectorAll("#node-list li[data-node]")) {
    const ns = state.stats && state.stats.nodes[li.dataset.node];
    const rates = ns && ns.ok ? ` · in ${fmt(ns.rows_in)} · out ${fmt(ns.rows_out)} rows/s` : "";
    li.querySelector(".counts").textContent = `${plural(boxes.get(li.dataset.node), "box", "boxes")}${rates}`;
  }
}

let shownOverview = null;
function renderLists(o) {
  const summary = document.getElementById("overview-summary");
  summary.textContent = `${o.boxes.toLocaleString("en")} boxes · ${o.streams.toLocaleString("en")} streams · ` +
    `${o.nodes.length} nodes · ${o.queries.length} queries`;
  summary.dataset.boxes = o.boxes;
  const all = document.getElementById("show-all");
  all.hidden = !state.full;
  all.classList.toggle("active", !!state.scope && state.scope.kind === "all");
  const active = (kind, name) => state.scope && state.scope.kind === kind && state.scope.name === name;

  const byName = (a, b) => a.localeCompare(b, undefined, {numeric: true});
  const sorted = [...o.queries].sort((a, b) => byName(a.name, b.name));
  const queries = sorted.slice(0, LIST_LIMIT).map((q) => {
    return el("li", {"data-query": q.name, "data-boxes": q.boxes, class: active("query", q.name) ? "active" : null,
                     onclick: () => setScope({kind: "query", name: q.name})},
      el("span", {class: "name", text: q.name}),
      el("span", {class: "counts"}));
  });
  const rows = new Map(state.nodes.map((n) => [n.endpoint, n]));
  const nodes = o.nodes.slice(0, LIST_LIMIT).map((n) => {
    const st = nodeStatus(n.endpoint, rows.get(n.endpoint));
    return el("li", {"data-node": n.endpoint, "data-boxes": n.boxes, class: active("node", n.endpoint) ? "active" : null,
                     onclick: () => setScope({kind: "node", name: n.endpoint})},
      el("span", {class: "dot " + st.cls, title: st.text}),
      el("span", {class: "name mono", text: n.endpoint}),
      el("span", {class: "counts"}));
  });
  const more = (list, what) => list.length > LIST_LIMIT
    ? [el("li", {class: "muted", text: `… ${list.length - LIST_LIMIT} more ${what}: search for them`})] : [];
  if (o.outside_queries && o.queries.length) {
    queries.push(el("li", {class: "muted", text: `${o.outside_queries} boxes in no query`}));
  }
  document.getElementById("query-list").replaceChildren(...queries, ...more(o.queries, "queries"));
  document.getElementById("node-list").replaceChildren(...nodes, ...more(o.nodes, "nodes"));
  document.getElementById("queries-head").hidden = !o.queries.length;
}

function renderScopeTitle() {
  const title = document.getElementById("scope-title");
  const scope = state.scope;
  document.getElementById("scope-bar").hidden = !scope || scope.kind === "all";
  if (scope && scope.kind !== "all") {
    const drawn = drawnBoxes().size;
    const what = scope.kind === "box" ? `box ${scope.name} and its neighbours` : `${scope.kind} ${scope.name}`;
    title.textContent = state.scopeLoading ? `${what} · reading…` : `${what} · ${plural(drawn, "box", "boxes")}`;
  }
  document.getElementById("canvas-hint").hidden = !!scope;
}

// -- the search --------------------------------------------------------------------------------

let searchSeq = 0;
async function runSearch(text) {
  const list = document.getElementById("search-results");
  const seq = ++searchSeq;
  if (!text.trim()) {
    list.replaceChildren();
    return;
  }
  let answer;
  try {
    answer = await getJson(`ui/search?q=${encodeURIComponent(text)}`);
  } catch (err) {
    if (seq === searchSeq) list.replaceChildren(el("li", {class: "message bad", text: String(err.message || err)}));
    return;
  }
  if (seq !== searchSeq) return;  // the user typed on: a newer search answers
  const detail = (m) => m.kind === "box" ? `${m.type} · ${m.nodes.join(", ") || "not placed"}` +
                                           (m.queries.length ? ` · ${m.queries.join(", ")}` : "")
    : m.kind === "stream" ? `from ${m.producers.join(", ") || "a publisher"} · ${plural(m.consumers, "reader", "readers")}`
      : plural(m.boxes, "box", "boxes");
  list.replaceChildren(...answer.matches.map((m) => el("li", {"data-kind": m.kind, "data-name": m.name,
    onclick: () => {
      setScope({kind: m.kind, name: m.name});
      if (m.kind === "box" && state.selected !== m.name) select(m.name);
    }},
    el("span", {class: "kind", text: m.kind}), el("span", {class: "name", text: m.name}),
    el("span", {class: "counts", text: detail(m)}))),
    ...(answer.matches.length ? [] : [el("li", {class: "muted", text: "nothing by that name"})]),
    ...(answer.more ? [el("li", {class: "muted", text: "more: type more of the name"})] : []));
}

// -- the scope: what is drawn ----------------------------------------------------------------------

function setScope(scope) {
  state.scope = scope || (state.full ? {kind: "all"} : null);
  if (!scope && state.selected) select(state.selected);  // back to the overview: the details close
  if (!state.full) loadScope();
  scheduleRender();
}

let scopeSeq = 0;
async function loadScope() {
  const scope = state.scope, seq = ++scopeSeq;
  if (state.full) return;
  if (!scope) {
    state.scopeLoading = false;
    state.catalog = new Map();
    scheduleRender();
    return;
  }
  let answer;
  state.scopeLoading = true;
  try {
    answer = await getJson(`ui/graph?${scope.kind}=${encodeURIComponent(scope.name)}`);
  } catch (err) {
    if (seq === scopeSeq) {
      state.scopeLoading = false;
      document.getElementById("scope-title").textContent = String(err.message || err);
    }
    return;
  }
  if (seq !== scopeSeq) return;  // another scope was picked meanwhile
  state.scopeLoading = false;
  state.catalog = new Map();
  apply(answer.items);
  for (const message of state.recent) if (message.version > answer.version) followChange(message, false);
  if (state.version === null || answer.version > state.version) state.version = answer.version;
  state.shownDetails = null;
  scheduleRender();
}

// A large catalog's change: applied to what the page holds (and what now belongs to the drawn scope).
function followChange(message, keep = true) {
  if (keep) {
    state.recent.push(message);
    if (state.recent.length > RECENT_LIMIT) state.recent.shift();
  }
  const scope = state.scope;
  let reload = false;
  for (const item of message.items) {
    const {kind: k, key, value} = item;
    const held = kind(k).has(key);
    if (k === "box" && !held && value !== null && !(scope && inScope(key, value))) continue;
    if (k === "partition" && !held && !kind("box").has(key)) continue;
    if (k === "query" && scope && scope.kind === "query" && key === scope.name) reload = true;  // its boxes changed
    if (value === null) kind(k).delete(key);
    else kind(k).set(key, value);
  }
  if (reload) loadScope();
}

// Whether box `name` belongs to the drawn scope (from what the page holds).
function inScope(name, box) {
  const scope = state.scope;
  if (!scope) return false;
  switch (scope.kind) {
    case "all": return true;
    case "query": {
      const q = kind("query").get(scope.name);
      return !!q && q.boxes.includes(name);
    }
    case "node": {
      const part = kind("partition").get(name);
      return part ? part.nodes.includes(scope.name) : box.node === scope.name;
    }
    case "stream": return box.outputs.includes(scope.name) || box.inputs.some((p) => p.stream === scope.name);
    case "box": {
      if (name === scope.name) return true;
      const centre = kind("box").get(scope.name);
      if (!centre) return false;
      return box.outputs.some((s) => centre.inputs.some((p) => p.stream === s)) ||
             box.inputs.some((p) => centre.outputs.includes(p.stream));
    }
    default: return false;
  }
}

// The boxes drawn: those the page holds that belong to the scope, by name.
function drawnBoxes() {
  const found = new Map();
  if (!state.scope) return found;
  for (const [name, box] of kind("box")) if (inScope(name, box)) found.set(name, box);
  return found;
}
