// Boreas web UI: the live topology of the Head's catalog, drawn as SVG.
//
// The catalog comes over a WebSocket (ui/feed): a full copy, then every commit's changes, in order,
// as a global component gets them.  Rates, counters and state sizes come from ui/stats (the Head
// polls the nodes), the nodes' state from the Head's /nodes and /status.  Everything is read-only
// unless the page is given the cluster token, which actions (moving a box) send to the Head.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const POLL_MS = 1000;
const COL_W = 220, COL_GAP = 90, BOX_W = 184, BOX_GAP = 14, NODE_HEAD = 46, TOP = 44, LEFT = 24;

const state = {
  catalog: new Map(),   // kind -> Map(key -> value): the Head's catalog, element by element
  version: null,        // the catalog version shown
  stats: null,          // the last /ui/stats answer
  nodes: [],            // the last /nodes answer's rows
  head: null,           // the last /status answer
  selected: null,       // the box whose details are shown
  full: true,           // the page holds the whole catalog (a small one); else only what it draws
  scope: null,          // what is drawn: {kind: "all"}, {kind: "query"|"node"|"box"|"stream", name}; null: the overview
  scopeLoading: false,  // a scope's graph is being read from the Head
  recent: [],           // the last change messages (large catalogs: replayed over a scope read at an older version)
  overview: null,       // the last /ui/overview answer
  shownDetails: null,   // what the details panel was built from (rebuilt only when it changes)
  token: sessionStorage.getItem("boreas-token") || "",
  connected: false,
};

// -- small helpers ---------------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined) continue;
    if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const child of children.flat()) if (child) node.append(child);
  return node;
}

// SVG text cut to fit a box, the whole text in its tooltip.
function label(attrs, text, max = 27) {
  const short = text.length > max ? text.slice(0, max - 1) + "…" : text;
  return svg("text", {...attrs, text: short}, short !== text ? svg("title", {text}) : null);
}

function fmt(n, digits = 1) {
  if (n === null || n === undefined) return "–";
  if (n >= 1e6) return (n / 1e6).toFixed(digits) + "M";
  if (n >= 1e4) return (n / 1e3).toFixed(digits) + "k";
  return Number.isInteger(n) ? String(n) : n.toFixed(n < 10 ? digits : 0);
}

function fmtBytes(n) {
  if (n === null || n === undefined) return "–";
  if (n >= 1 << 20) return (n / (1 << 20)).toFixed(1) + " MB";
  if (n >= 1 << 10) return (n / (1 << 10)).toFixed(1) + " kB";
  return n.toFixed(0) + " B";
}

function kind(name) {
  if (!state.catalog.has(name)) state.catalog.set(name, new Map());
  return state.catalog.get(name);
}

function headers(json) {
  const h = json ? {"Content-Type": "application/json"} : {};
  if (state.token) h.Authorization = "Bearer " + state.token;
  return h;
}

async function getJson(path) {
  const resp = await fetch(path, {headers: headers(false), cache: "no-store"});
  const body = await resp.json().catch(() => ({}));
  if (!resp.ok) throw new Error(body.error || `${path}: HTTP ${resp.status}`);
  return body;
}

// -- the live catalog ------------------------------------------------------------------------

function apply(items) {
  for (const {kind: k, key, value} of items) {
    if (value === null) kind(k).delete(key);
    else kind(k).set(key, value);
  }
}

// The whole catalog (state.full: a small one), or, for a large one, only its version and changes: the page
// then holds what it draws, asks the Head for it (overview.js: loadScope) and applies the changes to it.
function connect() {
  const url = new URL("ui/feed", location.href);
  url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
  if (!state.full) url.searchParams.set("summary", "1");
  const ws = new WebSocket(url);
  ws.onopen = () => setConnected(true);
  ws.onmessage = (event) => {
    const message = JSON.parse(event.data);
    if (message.type === "copy") {
      state.catalog = new Map();
      state.recent = [];
      if (message.summary) {
        state.version = message.version;
        loadScope();
        scheduleOverview();
        return;
      }
    } else if (state.version !== null && message.version <= state.version) return;
    if (state.full) apply(message.items);
    else followChange(message);
    state.version = message.version;
    scheduleOverview();
    scheduleRender();
  };
  ws.onclose = () => {
    setConnected(false);
    setTimeout(connect, 1000);  // a new connection starts with a fresh copy
  };
}

function setConnected(up) {
  state.connected = up;
  const conn = document.getElementById("conn");
  conn.textContent = up ? "live" : "reconnecting…";
  conn.className = "conn " + (up ? "up" : "down");
}

async function poll() {
  try {
    const [stats, nodes, head] = await Promise.all([getJson("ui/stats"), getJson("nodes"), getJson("status")]);
    state.stats = stats;
    state.nodes = nodes.nodes || [];
    state.head = head;
    scheduleRender();
  } catch (err) {
    // the Head is restarting or unreachable: the connection badge says so; keep polling
  } finally {
    setTimeout(poll, POLL_MS);
  }
}

let renderPending = false;
function scheduleRender() {
  if (renderPending) return;
  renderPending = true;
  requestAnimationFrame(() => {
    renderPending = false;
    render();
  });
}

// -- the topology model: box instances on nodes, streams between them --------------------------

// The graph drawn: the boxes in scope (overview.js: all of them, or one query's, node's, stream's, or a box
// and its neighbours), the clients on the streams they touch, and the nodes they run on.
function model() {
  const boxes = drawnBoxes(), partitions = kind("partition");
  const nodeRows = new Map(state.nodes.map((n) => [n.endpoint, n]));
  const known = new Set([...kind("node").keys(), ...nodeRows.keys()]);  // every node: where a box may move
  const endpoints = new Set(state.scope && state.scope.kind === "all" ? known : []);
  const instances = [];
  const byBox = new Map();
  for (const [name, box] of [...boxes].sort((a, b) => a[0].localeCompare(b[0]))) {
    const part = partitions.get(name);
    const made = [];
    if (part) {
      part.nodes.forEach((member, i) => {
        const segments = part.segments.filter((s) => s.member === i).map((s) => s.id);
        made.push({id: `${name}#${i}`, box: name, node: member, member: i, segments, value: box, part});
      });
    } else {
      made.push({id: name, box: name, node: box.node || "(not placed)", value: box});
    }
    for (const inst of made) endpoints.add(inst.node);
    instances.push(...made);
    byBox.set(name, made);
  }
  const producers = new Map();  // stream -> [box names]
  for (const [name, box] of boxes) for (const s of box.outputs) {
    if (!producers.has(s)) producers.set(s, []);
    producers.get(s).push(name);
  }
  // depth: how far down the dataflow a box is (input streams are at 0)
  const depth = new Map();
  const depthOf = (name, seen = new Set()) => {
    if (depth.has(name)) return depth.get(name);
    if (seen.has(name)) return 0;
    seen.add(name);
    let d = 1;
    for (const port of boxes.get(name).inputs) {
      for (const p of producers.get(port.stream) || []) d = Math.max(d, depthOf(p, seen) + 1);
    }
    depth.set(name, d);
    return d;
  };
  for (const name of boxes.keys()) depthOf(name);

  const clients = [];   // publishers and subscribers, drawn in their own columns
  const pubOf = new Map();
  const touched = new Set();  // the streams the drawn boxes read or write
  for (const box of boxes.values()) {
    for (const port of box.inputs) touched.add(port.stream);
    for (const s of box.outputs) touched.add(s);
  }
  const shown = (c) => state.scope && (state.scope.kind === "all" || touched.has(c.stream) || c.stream === state.scope.name);
  for (const pub of [...kind("publish").values()].filter(shown)) {
    const id = `publish:${pub.stream}:${pub.node || ""}`;
    const c = {id, client: "publisher", stream: pub.stream, title: pub.client || "publisher",
               detail: pub.node ? `into ${pub.node}` : "", node: pub.node};
    clients.push(c);
    if (!pubOf.has(pub.stream)) pubOf.set(pub.stream, []);
    pubOf.get(pub.stream).push(c);
  }
  for (const input of [...kind("input").values()].filter(shown)) {
    if (!pubOf.has(input.stream)) {  // an input with no declared publisher: whoever publishes to it
      const c = {id: `input:${input.stream}`, client: "publisher", stream: input.stream, title: "input",
                 detail: "", node: input.node};
      clients.push(c);
      pubOf.set(input.stream, [c]);
    }
  }
  const subs = [];
  for (const sub of [...kind("subscribe").values()].filter(shown)) {
    const c = {id: `subscribe:${sub.stream}:${sub.endpoint}`, client: "subscriber", stream: sub.stream,
               title: sub.endpoint, detail: "subscriber"};
    clients.push(c);
    subs.push(c);
  }

  // a partitioned box's streams are drawn to and from its first member; dashed lines join its members
  const ends = (name) => (byBox.get(name) || []).slice(0, 1);
  const edges = [];
  for (const made of byBox.values()) for (let i = 1; i < made.length; i++) {
    edges.push({from: made[i - 1].id, to: made[i].id, stream: made[i].box, member: true});
  }
  for (const inst of instances) {
    if (inst.member) continue;
    inst.value.inputs.forEach((port) => {
      const from = (producers.get(port.stream) || []).flatMap(ends);
      for (const src of from) edges.push({from: src.id, to: inst.id, stream: port.stream, srcNode: src.node,
                                          dstNode: inst.node});
      if (!from.length) for (const c of pubOf.get(port.stream) || []) {
        edges.push({from: c.id, to: inst.id, stream: port.stream, srcNode: c.node, dstNode: inst.node,
                    publisher: true});
      }
    });
  }
  const inputsOf = new Map();  // node -> the streams that reach it from publishers or other nodes
  for (const e of edges) {
    if (!e.dstNode || (!e.publisher && e.srcNode === e.dstNode)) continue;
    if (!inputsOf.has(e.dstNode)) inputsOf.set(e.dstNode, new Set());
    inputsOf.get(e.dstNode).add(e.publisher ? "publish:" + e.stream : "link:" + e.srcNode);
  }
  for (const e of edges) if (e.publisher) e.soleInput = inputsOf.get(e.dstNode).size === 1;
  for (const c of subs) {
    for (const p of producers.get(c.stream) || []) for (const src of ends(p)) {
      edges.push({from: src.id, to: c.id, stream: c.stream, srcNode: src.node, subscriber: true});
    }
    for (const p of pubOf.get(c.stream) || []) {
      if (!producers.has(c.stream)) edges.push({from: p.id, to: c.id, stream: c.stream, subscriber: true});
    }
  }

  // regions: node -> region names (a registration, node "", says where its component listens)
  const regionsOf = new Map(), regionEndpoint = new Map();
  for (const r of kind("region").values()) {
    if (!r.node) { regionEndpoint.set(r.region, r.endpoint); continue; }
    if (!regionsOf.has(r.node)) regionsOf.set(r.node, []);
    regionsOf.get(r.node).push(r.region);
    if (r.endpoint) regionEndpoint.set(r.region, r.endpoint);
  }
  return {instances, byBox, clients, edges, depth, endpoints: [...endpoints], known: [...known], nodeRows, regionsOf,
          regionEndpoint};
}

// -- layout and drawing -------------------------------------------------------------------------

function boxLines(inst) {
  const lines = [inst.value.type + (inst.part ? ` · member ${inst.member}` : "")];
  const sizes = state.stats && state.stats.boxes[inst.box];
  if (inst.part) {
    lines.push(`segments ${inst.segments.join(", ") || "none"}`);
    if (sizes) {
      const mine = Object.entries(sizes.segments).filter(([id]) => inst.segments.includes(Number(id)));
      lines.push(`${fmt(mine.reduce((n, [, s]) => n + s.entries, 0))} entries`);
    }
  } else if (sizes) {
    lines.push(`${fmt(sizes.entries)} entries`);
  } else {  // any other box with state: groups, buffered tuples, as its node reports them
    const ns = state.stats && state.stats.nodes[inst.node];
    const n = ns && (ns.box_entries || {})[inst.box];
    if (n !== undefined) lines.push(`state ${fmt(n)} entries`);
  }
  return lines;
}

function layout(m) {
  // order the nodes: by region, then by how deep in the dataflow their boxes are
  const meanDepth = new Map();
  for (const e of m.endpoints) {
    const ds = m.instances.filter((i) => i.node === e).map((i) => m.depth.get(i.box));
    meanDepth.set(e, ds.length ? ds.reduce((a, b) => a + b, 0) / ds.length : 1e9);
  }
  const groups = new Map();  // first region (or the node itself) -> endpoints
  for (const e of m.endpoints) {
    const g = (m.regionsOf.get(e) || [])[0];
    const key = g !== undefined ? "region:" + g : "node:" + e;
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(e);
  }
  const byDepth = (a, b) => meanDepth.get(a) - meanDepth.get(b) || a.localeCompare(b, undefined, {numeric: true});
  const ordered = [...groups.values()].map((g) => g.sort(byDepth));
  ordered.sort((a, b) => byDepth(a[0], b[0]));
  const columns = ordered.flat();

  const pos = new Map();  // instance id -> {x, y, w, h}
  const nodeBoxes = new Map();
  let x = LEFT;
  const publishers = m.clients.filter((c) => c.client === "publisher");
  const subscribers = m.clients.filter((c) => c.client === "subscriber");
  const clientColumn = (list, cx) => {
    let y = TOP + NODE_HEAD;
    for (const c of list) {
      pos.set(c.id, {x: cx, y, w: BOX_W, h: 42});
      y += 42 + BOX_GAP;
    }
  };
  if (publishers.length) {
    clientColumn(publishers, x);
    x += BOX_W + COL_GAP;
  }
  let bottom = TOP + NODE_HEAD + 60;
  for (const e of columns) {
    const mine = m.instances.filter((i) => i.node === e)
      .sort((a, b) => m.depth.get(a.box) - m.depth.get(b.box) || a.id.localeCompare(b.id));
    let y = TOP + NODE_HEAD;
    for (const inst of mine) {
      const h = 22 + 15 * boxLines(inst).length;
      pos.set(inst.id, {x: x + (COL_W - BOX_W) / 2, y, w: BOX_W, h});
      y += h + BOX_GAP;
    }
    nodeBoxes.set(e, {x, y: TOP, w: COL_W, h: Math.max(y - TOP, NODE_HEAD + 40), instances: mine});
    bottom = Math.max(bottom, y);
    x += COL_W + COL_GAP;
  }
  for (const frame of nodeBoxes.values()) frame.h = bottom - TOP;
  if (subscribers.length) {
    clientColumn(subscribers, x);
    x += BOX_W + COL_GAP;
  }
  bottom = Math.max(bottom, ...[...pos.values()].map((p) => p.y + p.h + BOX_GAP));
  return {columns, pos, nodeBoxes, width: x - COL_GAP + LEFT, height: bottom + 30};
}

// A stream's rate: tuples per second entering the node it goes to (from a publisher or another node),
// else tuples per second its node routes (its box writes), else batches per second its box writes,
// else the rate of the link between the nodes.
function edgeLabel(edge) {
  const stats = state.stats;
  if (!stats || edge.member) return null;
  const dst = edge.dstNode && stats.nodes[edge.dstNode], src = edge.srcNode && stats.nodes[edge.srcNode];
  const crosses = edge.publisher || (edge.srcNode && edge.dstNode && edge.srcNode !== edge.dstNode);
  if (crosses && dst && dst.streams_in && typeof dst.streams_in[edge.stream] === "number") {
    return `${fmt(dst.streams_in[edge.stream])} tuples/s`;
  }
  if (src && src.streams_routed && typeof src.streams_routed[edge.stream] === "number") {
    return `${fmt(src.streams_routed[edge.stream])} tuples/s`;
  }
  if (src && src.streams_out && typeof src.streams_out[edge.stream] === "number") {
    return `${fmt(src.streams_out[edge.stream])} batches/s`;
  }
  if (edge.publisher && dst && typeof dst.rows_in === "number" && edge.soleInput) return `${fmt(dst.rows_in)} rows/s`;
  if (crosses && src && dst) {
    const link = (src.links || {})[edge.dstNode];
    if (link && typeof link.batches === "number") return `link ${fmt(link.batches)} batches/s · ${fmtBytes(link.bytes)}/s`;
  }
  return null;
}

function nodeStatus(endpoint, row) {
  if (!row) return {cls: "warn", text: "not registered"};
  if (!row.alive) return {cls: "bad", text: "down"};
  if (!row.in_sync) return {cls: "warn", text: row.failure ? "failing" : "syncing"};
  return {cls: "ok", text: "up · in sync"};
}

function render() {
  const versionText = state.version === null ? "" : `catalog version ${state.version}`;
  document.getElementById("version").textContent = versionText;
  document.body.dataset.version = state.version === null ? "" : String(state.version);
  renderOverview();
  const m = model();
  const lay = layout(m);
  const graph = document.getElementById("graph");
  graph.replaceChildren();
  graph.style.display = state.scope ? "" : "none";  // the overview alone: no empty canvas
  graph.setAttribute("width", Math.max(lay.width, 400));
  graph.setAttribute("height", Math.max(lay.height, 300));
  graph.append(svg("defs", {}, svg("marker", {id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5,
    markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse"},
    svg("path", {d: "M 0 0 L 10 5 L 0 10 z", fill: "#7d8a99"}))));

  // regions: a dashed frame around their nodes' columns
  const regionNodes = new Map();
  for (const e of lay.columns) for (const r of m.regionsOf.get(e) || []) {
    if (!regionNodes.has(r)) regionNodes.set(r, []);
    regionNodes.get(r).push(lay.nodeBoxes.get(e));
  }
  for (const [r, frames] of regionNodes) {
    const x0 = Math.min(...frames.map((f) => f.x)) - 10, x1 = Math.max(...frames.map((f) => f.x + f.w)) + 10;
    const y0 = TOP - 26, y1 = Math.max(...frames.map((f) => f.y + f.h)) + 10;
    const where = m.regionEndpoint.get(r);
    graph.append(svg("g", {class: "region", "data-region": r},
      svg("rect", {class: "region-frame", x: x0, y: y0, width: x1 - x0, height: y1 - y0, rx: 8}),
      svg("text", {class: "region-label", x: x0 + 8, y: y0 + 16,
        text: `region ${r}` + (where && where !== r ? ` (${where})` : "")})));
  }

  const edgeLayer = svg("g", {class: "edges"});
  const nodeLayer = svg("g", {class: "nodes"});
  graph.append(nodeLayer, edgeLayer);

  for (const e of lay.columns) {
    const f = lay.nodeBoxes.get(e);
    const row = m.nodeRows.get(e);
    const st = nodeStatus(e, row);
    const ns = state.stats && state.stats.nodes[e];
    const rates = ns && ns.ok ? `in ${fmt(ns.rows_in)} · out ${fmt(ns.rows_out)} rows/s` : (ns ? "no status" : "");
    const g = svg("g", {class: "node" + (st.cls === "bad" ? " down" : ""), "data-node": e},
      svg("rect", {class: "node-frame", x: f.x, y: f.y, width: f.w, height: f.h, rx: 6}),
      svg("circle", {class: "dot " + st.cls, cx: f.x + 12, cy: f.y + 16, r: 5},
        svg("title", {text: st.text})),
      label({class: "node-title", x: f.x + 22, y: f.y + 20}, e, 26),
      label({class: "node-sub", x: f.x + 10, y: f.y + 36}, rates || st.text, 36));
    for (const inst of f.instances) g.append(drawBox(inst, lay.pos.get(inst.id)));
    nodeLayer.append(g);
  }
  for (const c of m.clients) {
    const p = lay.pos.get(c.id);
    nodeLayer.append(svg("g", {class: "box client", "data-client": c.client, "data-stream": c.stream},
      svg("rect", {x: p.x, y: p.y, width: p.w, height: p.h}),
      label({class: "name", x: p.x + 10, y: p.y + 17}, `${c.client === "publisher" ? "⇢" : "⇠"} ${c.stream}`, 24),
      label({class: "type", x: p.x + 10, y: p.y + 33}, [c.title, c.detail].filter(Boolean).join(" · "), 30)));
  }

  const frameBottom = Math.max(TOP, ...[...lay.nodeBoxes.values()].map((f) => f.y + f.h),
                               ...[...lay.pos.values()].map((p) => p.y + p.h));
  let lanes = 0;
  for (const edge of m.edges) {
    const a = lay.pos.get(edge.from), b = lay.pos.get(edge.to);
    if (!a || !b) continue;
    const path = edgePath(a, b, () => frameBottom + 18 + 17 * lanes++, edge.member);
    const rate = edgeLabel(edge);
    const hot = state.selected && (edge.from.split("#")[0] === state.selected || edge.to.split("#")[0] === state.selected);
    edgeLayer.append(svg("g", {class: "edge" + (hot ? " hot" : "") + (edge.member ? " member" : ""), "data-stream": edge.stream},
      svg("path", {d: path.d, "marker-end": edge.member ? null : "url(#arrow)"}),
      edge.member ? null : path.lane  // along a lane: one line, the rate after the name
        ? svg("text", {x: path.x, y: path.y - 3, "text-anchor": "middle"}, svg("tspan", {text: edge.stream}),
              rate ? svg("tspan", {class: "rate", text: ` · ${rate}`}) : null)
        : svg("text", {x: path.x, y: path.y - 3, "text-anchor": "middle", text: edge.stream}),
      rate && !path.lane ? svg("text", {class: "rate", x: path.x, y: path.y + 11, "text-anchor": "middle", text: rate})
        : null));
  }
  graph.setAttribute("height", Math.max(lay.height, frameBottom + 30 + 17 * lanes, 300));

  renderDetails(m);
  renderNodesView();
}

// The SVG path of an edge from box a to box b, and where its label goes.  Neighbouring columns: one
// curve; the same column: a loop out to the right; further apart: down to a lane of its own below the
// nodes, along it, and up into b, so that it crosses no box.
function edgePath(a, b, lane, member) {
  const x1 = a.x + a.w, y1 = a.y + a.h / 2, y2 = b.y + b.h / 2;
  if (member) {  // members of one partitioned box: a dashed line between the two boxes' bottoms
    const xa = a.x + a.w / 2, ya = a.y + a.h, xb = b.x + b.w / 2, yb = b.y + b.h;
    return {d: `M ${xa} ${ya} C ${xa} ${ya + 24}, ${xb} ${yb + 24}, ${xb} ${yb}`, x: (xa + xb) / 2, y: ya + 20};
  }
  if (Math.abs(a.x - b.x) < 1) {
    const x2 = b.x + b.w;
    return {d: `M ${x1} ${y1} C ${x1 + 50} ${y1}, ${x2 + 50} ${y2}, ${x2} ${y2}`, x: x1 + 40, y: (y1 + y2) / 2};
  }
  const x2 = b.x, gap = x2 - x1;
  if (gap > 0 && gap <= COL_GAP + (COL_W - BOX_W) + 5) {
    const dx = Math.max(40, gap / 2);
    return {d: `M ${x1} ${y1} C ${x1 + dx} ${y1}, ${x2 - dx} ${y2}, ${x2} ${y2}`, x: (x1 + x2) / 2,
            y: (y1 + y2) / 2};
  }
  const y = lane();
  const xa = x1 + 36, xb = x2 - 36;
  const d = `M ${x1} ${y1} C ${xa} ${y1}, ${xa} ${y1}, ${xa} ${Math.min(y1 + 24, y)} L ${xa} ${y - 12} ` +
            `Q ${xa} ${y}, ${xa + Math.sign(xb - xa) * 12} ${y} L ${xb - Math.sign(xb - xa) * 12} ${y} ` +
            `Q ${xb} ${y}, ${xb} ${y - 12} L ${xb} ${Math.min(y2 + 24, y)} C ${xb} ${y2}, ${xb} ${y2}, ${x2} ${y2}`;
  return {d, x: gap > 0 ? xb - 100 : xa - 100, y, lane: true};
}

function drawBox(inst, p) {
  const ns = state.stats && state.stats.nodes[inst.node];
  const broken = ns && (ns.broken || {})[inst.box];
  const cls = ["box", inst.value.type === "m3" ? "m3" : "", broken ? "broken" : "",
               state.selected === inst.box ? "selected" : ""].filter(Boolean).join(" ");
  const g = svg("g", {class: cls, "data-box": inst.box, "data-node": inst.node,
                      onclick: () => select(inst.box)},
    svg("rect", {x: p.x, y: p.y, width: p.w, height: p.h}),
    label({class: "name", x: p.x + 10, y: p.y + 17}, inst.box, 24));
  boxLines(inst).forEach((line, i) => {
    g.append(label({class: i ? "extra" : "type", x: p.x + 10, y: p.y + 33 + 15 * i}, line, 30));
  });
  return g;
}

// -- the details of one box ----------------------------------------------------------------------

function select(name) {
  state.selected = state.selected === name ? null : name;
  state.shownDetails = null;
  scheduleRender();
}

function renderDetails(m) {
  const aside = document.getElementById("details");
  const box = state.selected && kind("box").get(state.selected);
  if (!box) {
    aside.hidden = true;
    state.shownDetails = null;
    return;
  }
  aside.hidden = false;
  const part = kind("partition").get(state.selected) || null;
  const signature = JSON.stringify([state.selected, box, part, state.token !== "", [...m.known].sort()]);
  if (signature !== state.shownDetails) {  // the box changed (or another was picked): build the panel again
    const typed = {};  // what the user was typing in its forms survives the rebuild
    for (const input of aside.querySelectorAll("form [name]")) {
      typed[`${input.form.id}/${input.name}`] = input.type === "checkbox" ? input.checked : input.value;
    }
    const same = state.shownDetails && JSON.parse(state.shownDetails)[0] === state.selected;
    state.shownDetails = signature;
    buildDetails(aside, state.selected, box, part, m);
    for (const input of same ? aside.querySelectorAll("form [name]") : []) {
      const was = typed[`${input.form.id}/${input.name}`];
      if (was === undefined || input.tagName === "SELECT" && ![...input.options].some((o) => o.value === was)) continue;
      if (input.type === "checkbox") input.checked = was; else input.value = was;
    }
  }
  renderLive(state.selected, box, part);
}

function buildDetails(aside, name, box, part, m) {
  const where = part ? `partitioned over ${part.nodes.length} members` : (box.node || "not placed");
  aside.replaceChildren(...[
    el("button", {class: "close", type: "button", title: "close", onclick: () => select(name), text: "×"}),
    el("h2", {text: name}),
    el("div", {class: "muted", text: `${box.type} box · ${where}`}),
    el("h3", {text: "Streams"}),
    el("table", {}, el("tbody", {},
      box.inputs.map((p, i) => el("tr", {}, el("td", {text: `in ${i}`}), el("td", {class: "mono", text: p.stream + (p.view ? ` (view ${p.view})` : "")}))),
      box.outputs.map((s, i) => el("tr", {}, el("td", {text: `out ${i}`}), el("td", {class: "mono", text: s}))))),
    el("h3", {text: "Parameters"}),
    box.params.length ? el("table", {}, el("tbody", {},
      box.params.map(([k, v]) => el("tr", {}, el("td", {class: "mono", text: k}), el("td", {class: "mono"}, paramValue(v))))))
      : el("div", {class: "muted", text: "none"}),
    part ? segmentsTable(part) : null,
    el("h3", {text: "Counters"}),
    el("div", {id: "details-live"}),
    moveForm(name, box, part, m),
    part ? null : filterForm(name, box, m),
    box.type === "m3" ? el("div", {id: "m3-views"}, el("h3", {text: "Views"}), el("div", {class: "muted", text: "loading…"})) : null,
  ].filter(Boolean));
  if (box.type === "m3") loadViews(name);
}

// A long parameter (an m3 box's SQL) folded to its first line until clicked.
function paramValue(v) {
  if (v.length <= 80) return v;
  return el("details", {}, el("summary", {text: v.slice(0, 48).trim() + "…"}), el("pre", {text: v}));
}

function segmentsTable(part) {
  return el("div", {},
    el("h3", {text: `Segments (layout ${part.layout})`}),
    el("table", {}, el("thead", {}, el("tr", {}, el("th", {text: "segment"}), el("th", {text: "slots"}),
      el("th", {text: "node"}), el("th", {class: "num", text: "entries"}))),
    el("tbody", {id: "segments-body"},
      [...part.segments].sort((a, b) => a.lo - b.lo).map((s) => el("tr", {"data-segment": s.id},
        el("td", {text: `${part.box}/${s.id}`}), el("td", {text: `${s.lo}–${s.hi - 1}`}),
        el("td", {class: "mono", text: part.nodes[s.member]}), el("td", {class: "num seg-entries", text: "–"}))))));
}

function renderLive(name, box, part) {
  const live = document.getElementById("details-live");
  if (!live) return;
  const stats = state.stats;
  const rows = [];
  const nodes = part ? [...new Set(part.nodes)] : [box.node];
  const errors = [];
  for (const node of nodes) {
    const ns = stats && stats.nodes[node];
    if (!ns) continue;
    rows.push([`node ${node}`, ns.ok ? `in ${fmt(ns.rows_in)} · out ${fmt(ns.rows_out)} rows/s` : `no status: ${ns.error}`]);
    for (const [k, v] of Object.entries((ns.box_counters || {})[name] || {})) rows.push([k, fmt(v, 0)]);
    if (!part && box.type !== "m3" && (ns.box_entries || {})[name] !== undefined) rows.push(["state entries", fmt(ns.box_entries[name], 0)]);
    if (ns.broken && ns.broken[name]) errors.push(`${node}: broken: ${ns.broken[name]}`);
    if (ns.move_pauses && ns.move_pauses[name] !== undefined) rows.push(["last move pause", JSON.stringify(ns.move_pauses[name])]);
  }
  const sizes = stats && stats.boxes[name];
  if (sizes) {
    rows.push(["state", `${fmt(sizes.entries, 0)} map entries`]);
    for (const [map, n] of Object.entries(sizes.maps)) rows.push([`  ${map}`, fmt(n, 0)]);
    for (const [node, why] of Object.entries(sizes.errors || {})) errors.push(`${node}: ${why}`);
    for (const tr of document.querySelectorAll("#segments-body tr")) {
      const seg = sizes.segments[tr.dataset.segment];
      tr.querySelector(".seg-entries").textContent = seg ? fmt(seg.entries, 0) : "–";
    }
  }
  for (const e of (stats ? stats.errors : [])) {
    if (e.box === name || (!e.box && nodes.includes(e.node))) {
      errors.push(`${new Date(e.time * 1000).toLocaleTimeString()} ${e.node}: ${e.message}`);
    }
  }
  live.replaceChildren(
    rows.length ? el("table", {}, el("tbody", {}, rows.map(([k, v]) => el("tr", {}, el("td", {text: k}), el("td", {class: "num", text: v})))))
      : el("div", {class: "muted", text: "no figures yet"}),
    el("h3", {text: "Recent errors"}),
    errors.length ? el("ul", {class: "errors"}, errors.map((t) => el("li", {text: t}))) : el("div", {class: "muted", text: "none"}));
}

function moveForm(name, box, part, m) {
  const wrap = el("div", {}, el("h3", {text: "Move"}));
  if (!state.token) {
    wrap.append(el("div", {class: "muted", text: "Enter the cluster token (top right) to move boxes."}));
    return wrap;
  }
  const targets = part ? [...new Set(part.nodes)] : m.known.filter((e) => e !== box.node && !e.startsWith("("));
  const what = el("select", {name: "what"}, el("option", {value: name, text: part ? "the whole box" : name}),
    part ? part.segments.map((s) => el("option", {value: `${name}/${s.id}`, text: `segment ${name}/${s.id}`})) : []);
  const to = el("select", {name: "node"}, targets.map((e) => el("option", {value: e, text: e})));
  const out = el("div");
  const form = el("form", {id: "move-form", onsubmit: async (event) => {
    event.preventDefault();
    out.replaceChildren(el("div", {class: "message", text: `moving ${what.value} to ${to.value}…`}));
    try {
      const resp = await fetch("ui/move", {method: "POST", headers: headers(true),
        body: JSON.stringify({box: what.value, node: to.value})});
      const body = await resp.json().catch(() => ({}));
      if (!resp.ok) throw new Error(resp.status === 401 ? "the Head refused the token" : (body.error || `HTTP ${resp.status}`));
      out.replaceChildren(el("div", {class: "message good", text: `moved ${what.value} to ${to.value}`}));
    } catch (err) {
      out.replaceChildren(el("div", {class: "message bad", text: String(err.message || err)}));
    }
  }},
  el("label", {text: "move"}), what, el("label", {text: "to"}), to, el("button", {type: "submit", text: "Move"}));
  if (!targets.length) return wrap.append(el("div", {class: "muted", text: "no other node to move it to"})), wrap;
  wrap.append(form, out);
  return wrap;
}

// POST an action to the Head; the message it leaves in `out`.
async function act(path, body, out, doing, done) {
  out.replaceChildren(el("div", {class: "message", text: doing}));
  try {
    const resp = await fetch(path, {method: "POST", headers: headers(true), body: JSON.stringify(body)});
    const answer = await resp.json().catch(() => ({}));
    if (!resp.ok) throw new Error(resp.status === 401 ? "the Head refused the token" : (answer.error || `HTTP ${resp.status}`));
    out.replaceChildren(el("div", {class: "message good", text: done}));
  } catch (err) {
    out.replaceChildren(el("div", {class: "message bad", text: String(err.message || err)}));
  }
}

// Insert a filter before one of the box's in ports (boreas connect), or remove the box if a connect inserted it.
function filterForm(name, box, m) {
  const wrap = el("div", {}, el("h3", {text: "Filter"}));
  if (!state.token) {
    wrap.append(el("div", {class: "muted", text: "Enter the cluster token (top right) to insert filters."}));
    return wrap;
  }
  if (!box.inputs.length) return null;
  const port = el("select", {name: "port"}, box.inputs.map((p, i) => el("option", {value: String(i), text: `in ${i}: ${p.stream}`})));
  const expression = el("input", {name: "expression", placeholder: "e.g. celsius > 0.0", required: true});
  const fname = el("input", {name: "name", placeholder: "its name (the stream it writes)", required: true});
  const upstream = el("input", {type: "checkbox", name: "upstream"});
  const out = el("div");
  const form = el("form", {id: "filter-form", onsubmit: (event) => {
    event.preventDefault();
    act("ui/connect", {box: name, port: Number(port.value), expression: expression.value, name: fname.value,
                       upstream: upstream.checked}, out, `inserting ${fname.value}…`,
        `inserted ${fname.value} before ${name} ${port.selectedOptions[0].text}`);
  }},
  el("label", {text: "before"}), port, el("label", {text: "keep"}), expression, el("label", {text: "as"}), fname,
  el("label", {}, upstream, " upstream"), el("button", {type: "submit", text: "Insert"}));
  wrap.append(form);
  const written = box.outputs.length === 1 ? box.outputs[0] : null;
  const readers = written ? [...kind("box").entries()].filter(([, b]) => b.inputs.some((p) => p.stream === written)) : [];
  if (box.type === "filter" && box.inputs.length === 1 && readers.length === 1) {
    wrap.append(el("button", {type: "button", id: "disconnect", text: `Remove ${name} (${readers[0][0]} reads ${box.inputs[0].stream} again)`,
      onclick: () => act("ui/disconnect", {stream: written}, out, `removing ${name}…`, `removed ${name}`)}));
  }
  wrap.append(out);
  return wrap;
}

async function loadViews(name) {
  let maps;
  try {
    maps = await getJson(`ui/query/${encodeURIComponent(name)}/maps`);
  } catch (err) {
    const box = document.getElementById("m3-views");
    if (box) box.replaceChildren(el("h3", {text: "Views"}), el("div", {class: "message bad", text: String(err.message)}));
    return;
  }
  const box = document.getElementById("m3-views");
  if (!box || state.selected !== name) return;
  const readable = [...Object.entries(maps.views).map(([v, info]) => [v, info.keys, `view: ${info.values.join(", ")}`]),
                    ...Object.entries(maps.maps).map(([mp, info]) => [mp, info.keys, `map (${info.value})`])];
  const pick = el("select", {name: "map"}, readable.map(([n, , what]) => el("option", {value: n, text: `${n} — ${what}`})));
  const keysRow = el("div", {class: "keys"});
  const showKeys = () => {
    const entry = readable.find(([n]) => n === pick.value);
    keysRow.replaceChildren(...(entry ? entry[1] : []).map(([col, type]) =>
      el("input", {name: "key", placeholder: `${col} (${type}) or _`, size: 12})));
  };
  pick.addEventListener("change", showKeys);
  showKeys();
  const agg = el("select", {name: "agg"}, ["slice", "sum", "min", "max"].map((a) => el("option", {value: a, text: a})));
  const stable = el("input", {type: "checkbox", name: "stable"});
  const result = el("div", {class: "result"});
  const form = el("form", {id: "query-form", onsubmit: async (event) => {
    event.preventDefault();
    const params = new URLSearchParams({map: pick.value, agg: agg.value});
    const keys = [...keysRow.querySelectorAll("input")].map((i) => i.value.trim() || "_");
    while (keys.length && keys[keys.length - 1] === "_") keys.pop();
    for (const k of keys) params.append("key", k);
    if (stable.checked) params.set("stable", "1");
    result.replaceChildren(el("div", {class: "muted", text: "reading…"}));
    try {
      const answer = await getJson(`ui/query/${encodeURIComponent(name)}?${params}`);
      result.replaceChildren(queryTable(answer));
    } catch (err) {
      result.replaceChildren(el("div", {class: "message bad", text: String(err.message)}));
    }
  }},
  el("label", {text: "read"}), pick, el("label", {text: "keys"}), keysRow, el("label", {text: "aggregate"}), agg,
  el("label", {text: "stable"}), stable, el("button", {type: "submit", text: "Query"}));
  const list = el("ul", {}, Object.entries(maps.views).map(([v, info]) =>
    el("li", {}, el("b", {text: v}), ` (${info.keys.map((k) => k[0]).join(", ")}) → ${info.values.join(", ")}`,
      Object.entries(maps.streams).filter(([, view]) => view === v).map(([s]) => ` · on stream ${s}`))));
  box.replaceChildren(el("h3", {text: "Views"}), list, form, result);
}

function cell(v) {
  return typeof v === "number" ? v.toLocaleString("en", {maximumFractionDigits: 4}) : String(v);
}

function queryTable(answer) {
  const cols = answer.keys.map((k) => k[0]);
  const head = el("tr", {}, cols.map((c) => el("th", {text: c})), el("th", {class: "num", text: "value"}));
  const body = answer.rows.map((r) => el("tr", {},
    r.key.map((k) => el("td", {text: k === null ? "_" : String(k)})),
    el("td", {class: "num", text: (Array.isArray(r.value) ? r.value : [r.value]).map(cell).join(", ")})));
  return el("div", {},
    el("div", {class: "muted", text: `${answer.map} · ${answer.agg} · ${answer.rows.length} row(s) from ${answer.node}` +
      (answer.truncated ? " (first rows only)" : "")}),
    el("table", {}, el("thead", {}, head), el("tbody", {}, body)));
}

// -- the node view -----------------------------------------------------------------------------

function renderNodesView() {
  const tbody = document.querySelector("#nodes-table tbody");
  const stats = state.stats;
  tbody.replaceChildren(...state.nodes.map((n) => {
    const st = nodeStatus(n.endpoint, n);
    const ns = stats && stats.nodes[n.endpoint];
    const rec = n.recovery || {};
    const problems = [n.failure, ...(n.pending || []), ns && !ns.ok ? ns.error : null,
                      ...Object.entries((ns && ns.broken) || {}).map(([b, why]) => `${b}: ${why}`)].filter(Boolean);
    const failover = n.failover ? (typeof n.failover === "string" ? n.failover : JSON.stringify(n.failover)) : "–";
    return el("tr", {"data-node": n.endpoint},
      el("td", {class: "mono", text: n.endpoint}),
      el("td", {}, el("span", {class: "badge " + st.cls, text: n.alive ? "up" : "down"})),
      el("td", {text: n.in_sync ? `in sync (v${n.acked_version})` : `v${n.acked_version ?? "–"} of v${n.desired_version ?? "–"}`}),
      el("td", {class: "num", text: n.boxes}),
      el("td", {class: "num", text: ns ? fmt(ns.rows_in) : "–"}),
      el("td", {class: "num", text: ns ? fmt(ns.rows_out) : "–"}),
      el("td", {text: rec.durable ? (rec.state || "durable") + (rec.shared ? " · shared dir" : "") : "in memory"}),
      el("td", {text: rec.last_snapshot ?? "–"}),
      el("td", {text: failover}),
      el("td", {text: problems.join("; ") || "–"}));
  }));
  const head = state.head;
  if (head) {
    const snaps = head.snapshots || {};
    document.getElementById("head-summary").textContent =
      `Head: catalog ${head.catalog}, version ${head.version}; ${head.nodes} nodes; ` +
      `last complete snapshot ${snaps.last_complete ?? "none"}; failover after ${(head.failover || {}).after ?? "–"} s; ` +
      `${head.pending_requests} pending requests.`;
  }
  const errors = (stats && stats.errors) || [];
  document.getElementById("errors").replaceChildren(...(errors.length ? [...errors].reverse().map((e) =>
    el("li", {text: `${new Date(e.time * 1000).toLocaleTimeString()} ${e.node}${e.box ? " " + e.box : ""}: ${e.message}`}))
    : [el("li", {class: "muted", text: "none"})]));
}

// -- start -----------------------------------------------------------------------------------

function showView(name) {
  for (const b of document.querySelectorAll("header nav button")) b.classList.toggle("active", b.dataset.view === name);
  document.getElementById("topology-view").hidden = name !== "topology";
  document.getElementById("nodes-view").hidden = name !== "nodes";
  location.hash = name === "topology" ? "" : name;
}

function showAuth() {
  document.getElementById("auth-state").textContent = state.token ? "token set: actions enabled" : "read-only";
  document.getElementById("token").value = state.token;
}

document.querySelectorAll("header nav button").forEach((b) => b.addEventListener("click", () => showView(b.dataset.view)));
document.getElementById("auth").addEventListener("submit", (event) => {
  event.preventDefault();
  state.token = document.getElementById("token").value.trim();
  if (state.token) sessionStorage.setItem("boreas-token", state.token);
  else sessionStorage.removeItem("boreas-token");
  showAuth();
  state.shownDetails = null;
  scheduleRender();
});
showAuth();
showView(location.hash === "#nodes" ? "nodes" : "topology");
start();
