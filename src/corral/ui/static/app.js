// corral's dashboard: one ES module, no dependencies. Every byte of data comes from the API with the
// user's token; the DOM is written with textContent only, never HTML from the API.

const ZONE_KEYS = ["topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone"];
const ROW = 26; // px per table row
const RENDER_EVERY = 250; // ms: live tables and the map redraw at most this often

const state = { token: sessionStorage.getItem("corral.token") || "", page: "", collections: new Map(),
                pending: false, resource: "cpu" };
const $ = (id) => document.getElementById(id);

// --- the API ---------------------------------------------------------------------------------

class Unauthorized extends Error {}

function headers(json) {
  const h = { Authorization: `Bearer ${state.token}`, Accept: "application/json" };
  if (json) h["Content-Type"] = "application/json";
  return h;
}

async function api(path, { method = "GET", body, signal } = {}) {
  const response = await fetch(path, { method, headers: headers(body !== undefined), signal,
                                        body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (response.status === 401) {
    logout("The server refused this token: log in again.");
    throw new Unauthorized();
  }
  if (!response.ok) {
    const error = new Error((data && data.message) || `${response.status} ${response.statusText}`);
    error.status = response.status;
    error.data = data;
    throw error;
  }
  return data;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// A list, then a watch from its resourceVersion, kept up to date until stopped (a relist when the
// watch ends or expires). onChange is called after each change; the page decides when to draw.
class Collection {
  constructor(path) {
    this.path = path;
    this.items = new Map();
    this.synced = false;
    this.error = "";
    this.stopped = false;
    this.abort = null;
  }

  key(o) { const m = o.metadata || {}; return m.namespace ? `${m.namespace}/${m.name}` : m.name; }

  async start() {
    while (!this.stopped) {
      try {
        await this.follow();
      } catch (error) {
        if (error instanceof Unauthorized || this.stopped) return;
        this.error = error.message || String(error);
        changed();
        await sleep(error.status === 403 ? 10000 : 1000);
      }
    }
  }

  async follow() {
    this.abort = new AbortController();
    const list = await api(this.path, { signal: this.abort.signal });
    this.items = new Map((list.items || []).map((o) => [this.key(o), o]));
    this.synced = true;
    this.error = "";
    changed();
    let rv = list.metadata.resourceVersion;
    while (!this.stopped) {
      const sep = this.path.includes("?") ? "&" : "?";
      const response = await fetch(`${this.path}${sep}watch=1&allowWatchBookmarks=true&resourceVersion=${rv}`,
                                   { headers: headers(false), signal: this.abort.signal });
      if (response.status === 401) { logout("The server refused this token: log in again."); throw new Unauthorized(); }
      if (!response.ok) throw Object.assign(new Error(`watch: ${response.status}`), { status: response.status });
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let nl;
        while ((nl = buffer.indexOf("\n")) >= 0) {
          const line = buffer.slice(0, nl);
          buffer = buffer.slice(nl + 1);
          if (!line.trim()) continue;
          const event = JSON.parse(line);
          if (event.type === "ERROR") return; // expired: list again
          rv = (event.object.metadata || {}).resourceVersion || rv;
          if (event.type === "BOOKMARK") continue;
          const k = this.key(event.object);
          if (event.type === "DELETED") this.items.delete(k); else this.items.set(k, event.object);
          changed();
        }
      }
    }
  }

  stop() {
    this.stopped = true;
    if (this.abort) this.abort.abort();
  }
}

const PATHS = {
  nodes: "/api/v1/nodes", pods: "/api/v1/pods", events: "/api/v1/events",
  deployments: "/apis/apps/v1/deployments", replicasets: "/apis/apps/v1/replicasets",
  daemonsets: "/apis/apps/v1/daemonsets", jobs: "/apis/batch/v1/jobs", cronjobs: "/apis/batch/v1/cronjobs",
  placements: "/apis/placement.corral.dev/v1/placements",
};

function collection(name) {
  let c = state.collections.get(name);
  if (!c) {
    c = new Collection(PATHS[name]);
    state.collections.set(name, c);
    c.start();
  }
  return c;
}

function changed() {
  if (state.pending) return;
  state.pending = true;
  setTimeout(() => { state.pending = false; render(); }, RENDER_EVERY);
}

// --- quantities and objects ------------------------------------------------------------------

const BINARY = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60 };
const DECIMAL = { n: 1e-9, u: 1e-6, m: 1e-3, "": 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18 };

function quantity(value) {
  if (value === undefined || value === null) return 0;
  const m = /^([+-]?[0-9.]+)([eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?$/.exec(String(value).trim());
  if (!m) return 0;
  const n = parseFloat(m[1]);
  const suffix = m[2] || "";
  if (suffix in BINARY) return n * BINARY[suffix];
  if (suffix in DECIMAL) return n * DECIMAL[suffix];
  return n * 10 ** parseInt(suffix.slice(1), 10);
}

function podRequests(pod) {
  const sum = { cpu: 0, memory: 0 };
  for (const c of (pod.spec && pod.spec.containers) || []) {
    const r = (c.resources && c.resources.requests) || {};
    sum.cpu += quantity(r.cpu);
    sum.memory += quantity(r.memory);
  }
  for (const c of (pod.spec && pod.spec.initContainers) || []) { // as Kubernetes: the larger of the two
    const r = (c.resources && c.resources.requests) || {};
    sum.cpu = Math.max(sum.cpu, quantity(r.cpu));
    sum.memory = Math.max(sum.memory, quantity(r.memory));
  }
  return sum;
}

const finished = (pod) => ["Succeeded", "Failed"].includes((pod.status || {}).phase);

function zoneOf(node) {
  const labels = node.metadata.labels || {};
  for (const k of ZONE_KEYS) if (labels[k]) return labels[k];
  return "";
}

function nodeFacts(node) {
  const ready = ((node.status || {}).conditions || []).find((c) => c.type === "Ready");
  const taints = ((node.spec || {}).taints || []).filter((t) => t.effect === "NoSchedule" || t.effect === "NoExecute");
  const alloc = (node.status || {}).allocatable || (node.status || {}).capacity || {};
  return { ready: !!ready && ready.status === "True", cordoned: !!(node.spec || {}).unschedulable, taints,
           cpu: quantity(alloc.cpu), memory: quantity(alloc.memory) };
}

function usageByNode(pods) {
  const usage = new Map();
  for (const pod of pods) {
    const node = pod.spec && pod.spec.nodeName;
    if (!node || finished(pod)) continue;
    const u = usage.get(node) || { cpu: 0, memory: 0, pods: 0 };
    const r = podRequests(pod);
    u.cpu += r.cpu; u.memory += r.memory; u.pods += 1;
    usage.set(node, u);
  }
  return usage;
}

function age(ts) {
  if (!ts) return "";
  const s = Math.max(0, (Date.now() - Date.parse(ts)) / 1000);
  if (s < 120) return `${Math.floor(s)}s`;
  if (s < 7200) return `${Math.floor(s / 60)}m`;
  if (s < 172800) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86400)}d`;
}

function cpuText(cores) { return cores >= 1 ? `${+cores.toFixed(2)}` : `${Math.round(cores * 1000)}m`; }
function bytesText(b) {
  for (const [s, f] of [["Ti", 2 ** 40], ["Gi", 2 ** 30], ["Mi", 2 ** 20], ["Ki", 2 ** 10]]) if (b >= f) return `${+(b / f).toFixed(1)}${s}`;
  return `${Math.round(b)}`;
}

function podStatus(pod) {
  if (pod.metadata.deletionTimestamp) return "Terminating";
  const st = pod.status || {};
  if (st.phase === "Pending" && pod.spec.nodeName) return "Scheduled";
  return st.phase || "Pending";
}

// --- elements ---------------------------------------------------------------------------------

function el(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === "class") e.className = v; else if (k === "text") e.textContent = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}

// A table that renders only the rows in view: 15,000 pods scroll as smoothly as 15. Columns:
// {title, value(row) → string|number (sorting, filtering, the cell's text), text(row)? (the cell's
// text when it differs), link(row) → href?}.
class VTable {
  constructor(container, columns, { rowClass, sort = 0, down = false } = {}) {
    this.container = container;
    this.columns = columns;
    this.rowClass = rowClass;
    this.sort = sort;
    this.down = down;
    this.rows = [];
    this.filter = "";
    container.replaceChildren();
    this.box = el("div", { class: "vtable" });
    this.head = el("div", { class: "head" });
    columns.forEach((c, i) => {
      const cell = el("div", { class: "cell", text: c.title, role: "columnheader" });
      cell.addEventListener("click", () => {
        if (this.sort === i) this.down = !this.down; else { this.sort = i; this.down = false; }
        this.refresh();
      });
      this.head.append(cell);
    });
    this.body = el("div", { class: "body" });
    this.spacer = el("div", { class: "spacer" });
    this.box.append(this.head, this.body);
    this.body.append(this.spacer);
    container.append(this.box);
    this.box.addEventListener("scroll", () => this.draw());
  }

  set(rows) {
    this.all = rows;
    this.refresh();
  }

  refresh() {
    const f = this.filter.toLowerCase();
    let rows = this.all || [];
    if (f) rows = rows.filter((r) => this.columns.some((c) => String(c.value(r)).toLowerCase().includes(f)));
    const c = this.columns[this.sort];
    const dir = this.down ? -1 : 1;
    rows = rows.map((r, i) => [c.value(r), i, r]);
    rows.sort((a, b) => {
      const x = a[0], y = b[0];
      const cmp = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y), undefined, { numeric: true });
      return cmp * dir || a[1] - b[1];
    });
    this.rows = rows.map((t) => t[2]);
    [...this.head.children].forEach((h, i) => { h.className = `cell${i === this.sort ? " sorted" : ""}${i === this.sort && this.down ? " up" : ""}`; });
    this.spacer.style.height = `${this.rows.length * ROW}px`;
    // As tall as its rows (at least three), at most most of the window: then it scrolls.
    this.box.style.height = `${Math.min(window.innerHeight * 0.65, (Math.max(this.rows.length, 3) + 1) * ROW + 8)}px`;
    this.draw(true);
  }

  draw(force) {
    const top = this.box.scrollTop;
    const first = Math.max(0, Math.floor(top / ROW) - 5);
    const last = Math.min(this.rows.length, Math.ceil((top + this.box.clientHeight) / ROW) + 5);
    if (!force && first === this.first && last === this.last) return;
    this.first = first; this.last = last;
    const out = [];
    const offset = this.head.offsetHeight;
    for (let i = first; i < last; i++) {
      const r = this.rows[i];
      const row = el("div", { class: `row${this.rowClass ? " " + (this.rowClass(r) || "") : ""}`, role: "row" });
      row.style.top = `${offset + i * ROW}px`;
      for (const c of this.columns) {
        const text = String(c.text ? c.text(r) : c.value(r));
        const href = c.link && c.link(r);
        row.append(el("div", { class: "cell", title: text, role: "cell" }, href ? el("a", { href, text }) : text));
      }
      out.push(row);
    }
    this.body.replaceChildren(this.spacer, ...out);
  }
}

// --- the map ----------------------------------------------------------------------------------

function palette() {
  const css = getComputedStyle(document.documentElement);
  const get = (name) => css.getPropertyValue(name).trim();
  return { ok: get("--ok"), mid: get("--mid"), high: get("--high"), notready: get("--notready"),
           cordoned: get("--cordoned"), tainted: get("--tainted") };
}

const colour = (colours, share) => (share >= 0.8 ? colours.high : share >= 0.5 ? colours.mid : colours.ok);

// Nodes as tiles grouped by zone, each coloured by requested / allocatable of the chosen resource.
// marks: node name → a count to print on the tile (the plan page's pods).
function drawMap(canvas, nodes, usage, resource, marks) {
  const wrap = canvas.parentElement;
  const width = Math.max(300, wrap.clientWidth - 2);
  const n = nodes.length;
  const size = n > 2000 ? 9 : n > 500 ? 14 : n > 100 ? 22 : 34;
  const gap = size > 14 ? 3 : 1;
  const pad = 8;
  const cols = Math.max(1, Math.floor((width - 2 * pad) / (size + gap)));
  const zones = new Map();
  for (const node of nodes) {
    const z = zoneOf(node);
    if (!zones.has(z)) zones.set(z, []);
    zones.get(z).push(node);
  }
  const order = [...zones.keys()].sort();
  let y = pad;
  const tiles = [];
  const labels = [];
  for (const z of order) {
    const members = zones.get(z).sort((a, b) => a.metadata.name.localeCompare(b.metadata.name, undefined, { numeric: true }));
    labels.push({ text: `${z || "(no zone)"} · ${members.length} node${members.length === 1 ? "" : "s"}`, y: y + 12 });
    y += 18;
    members.forEach((node, i) => {
      tiles.push({ node, x: pad + (i % cols) * (size + gap), y: y + Math.floor(i / cols) * (size + gap), size });
    });
    y += Math.ceil(members.length / cols) * (size + gap) + 10;
  }
  const ratio = window.devicePixelRatio || 1;
  canvas.width = width * ratio;
  canvas.height = Math.max(y, 40) * ratio;
  canvas.style.width = `${width}px`;
  canvas.style.height = `${Math.max(y, 40)}px`;
  const g = canvas.getContext("2d");
  g.scale(ratio, ratio);
  g.clearRect(0, 0, width, y);
  g.font = "12px system-ui, sans-serif";
  g.fillStyle = "#333";
  for (const l of labels) g.fillText(l.text, pad, l.y);
  const colours = palette(); // read once a drawing, not once a tile
  for (const t of tiles) {
    const f = nodeFacts(t.node);
    const u = usage.get(t.node.metadata.name) || { cpu: 0, memory: 0, pods: 0 };
    t.facts = f;
    t.usage = u;
    const share = f[resource] ? u[resource] / f[resource] : 0;
    g.fillStyle = f.ready ? colour(colours, share) : colours.notready;
    g.fillRect(t.x, t.y, t.size, t.size);
    if (f.cordoned) {
      g.strokeStyle = colours.cordoned;
      g.lineWidth = Math.max(1.5, t.size / 8);
      g.strokeRect(t.x + g.lineWidth / 2, t.y + g.lineWidth / 2, t.size - g.lineWidth, t.size - g.lineWidth);
    }
    if (f.taints.length) {
      g.fillStyle = colours.tainted;
      g.beginPath();
      g.arc(t.x + t.size * 0.78, t.y + t.size * 0.22, Math.max(1.5, t.size / 7), 0, 2 * Math.PI);
      g.fill();
    }
    const mark = marks && marks.get(t.node.metadata.name);
    if (mark) {
      g.strokeStyle = "#111";
      g.lineWidth = 2;
      g.strokeRect(t.x + 1, t.y + 1, t.size - 2, t.size - 2);
      if (t.size >= 20) {
        g.fillStyle = "#111";
        g.fillText(`+${mark}`, t.x + 3, t.y + t.size - 5);
      }
    }
  }
  canvas.tiles = tiles;
  return tiles;
}

function tileAt(canvas, event) {
  const box = canvas.getBoundingClientRect();
  const x = event.clientX - box.left, y = event.clientY - box.top;
  return (canvas.tiles || []).find((t) => x >= t.x && x < t.x + t.size && y >= t.y && y < t.y + t.size);
}

function describeTile(t) {
  const f = t.facts, u = t.usage;
  const pct = (a, b) => (b ? ` (${Math.round((100 * a) / b)}%)` : "");
  const lines = [t.node.metadata.name, `zone: ${zoneOf(t.node) || "(none)"}`,
                 `cpu: ${cpuText(u.cpu)} of ${cpuText(f.cpu)} requested${pct(u.cpu, f.cpu)}`,
                 `memory: ${bytesText(u.memory)} of ${bytesText(f.memory)} requested${pct(u.memory, f.memory)}`,
                 `pods: ${u.pods}`, f.ready ? "Ready" : "NotReady"];
  if (f.cordoned) lines.push("cordoned (unschedulable)");
  for (const taint of f.taints) lines.push(`taint: ${taint.key}${taint.value ? "=" + taint.value : ""}:${taint.effect}`);
  return lines.join("\n");
}

// --- pages ------------------------------------------------------------------------------------

function show(id) {
  for (const section of document.querySelectorAll(".page")) section.hidden = section.id !== id;
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("active", a.dataset.page === state.page);
}

function renderMap() {
  const nodes = collection("nodes"), pods = collection("pods");
  show("page-map");
  const list = [...nodes.items.values()];
  const facts = list.map(nodeFacts);
  const zones = new Set(list.map(zoneOf));
  const summary = nodes.error ? `nodes: ${nodes.error}` : !nodes.synced ? "loading…" :
    `${list.length} node${list.length === 1 ? "" : "s"} in ${zones.size} zone${zones.size === 1 ? "" : "s"} · ` +
    `${facts.filter((f) => !f.ready).length} NotReady · ${facts.filter((f) => f.cordoned).length} cordoned · ` +
    `${facts.filter((f) => f.taints.length).length} tainted · ${pods.items.size} pods`;
  $("map-summary").textContent = summary;
  drawMap($("map"), list, usageByNode(pods.items.values()), state.resource);
}

const TABLES = {
  pods: { title: "Pods", sources: ["pods"], columns: [
    { title: "Namespace", value: (p) => p.metadata.namespace },
    { title: "Name", value: (p) => p.metadata.name, link: (p) => `#/pod/${p.metadata.namespace}/${p.metadata.name}` },
    { title: "Status", value: podStatus },
    { title: "Node", value: (p) => p.spec.nodeName || "" },
    { title: "Age", value: (p) => age(p.metadata.creationTimestamp) },
  ], rows: () => [...collection("pods").items.values()] },
  workloads: { title: "Workloads", sources: ["deployments", "replicasets", "daemonsets", "jobs", "cronjobs"], columns: [
    { title: "Kind", value: (w) => w.kind },
    { title: "Namespace", value: (w) => w.metadata.namespace },
    { title: "Name", value: (w) => w.metadata.name },
    { title: "Desired", value: (w) => desired(w) },
    { title: "Ready", value: (w) => ready(w) },
    { title: "Age", value: (w) => age(w.metadata.creationTimestamp) },
  ], rows: () => ["deployments", "replicasets", "daemonsets", "jobs", "cronjobs"].flatMap((name) =>
    [...collection(name).items.values()].map((o) => ({ ...o, kind: o.kind || KINDS[name] }))) },
  placements: { title: "Placements", sources: ["placements"], columns: [
    { title: "Namespace", value: (p) => p.metadata.namespace },
    { title: "Name", value: (p) => p.metadata.name },
    { title: "Type", value: (p) => ((p.spec || {}).policy || {}).placementType || "PickAll" },
    { title: "Wanted", value: (p) => ((p.spec || {}).policy || {}).numberOfNodes ?? "all eligible" },
    { title: "Selected", value: (p) => (((p.status || {}).decisions) || []).filter((d) => d.selected).length },
    { title: "Bound", value: (p) => (((p.status || {}).decisions) || []).filter((d) => d.state === "Bound").length },
    { title: "Age", value: (p) => age(p.metadata.creationTimestamp) },
  ], rows: () => [...collection("placements").items.values()] },
  events: { title: "Events", sources: ["events"], sort: 0, down: true, columns: [
    { title: "Last seen", value: (e) => e.lastTimestamp || e.eventTime || e.metadata.creationTimestamp || "" },
    { title: "Type", value: (e) => e.type || "" },
    { title: "Reason", value: (e) => e.reason || "" },
    { title: "Object", value: (e) => `${(e.involvedObject || {}).kind || ""}/${(e.involvedObject || {}).name || ""}` },
    { title: "Message", value: (e) => e.message || "" },
  ], rows: () => [...collection("events").items.values()] },
};
const KINDS = { deployments: "Deployment", replicasets: "ReplicaSet", daemonsets: "DaemonSet", jobs: "Job", cronjobs: "CronJob" };

function desired(w) {
  const s = w.spec || {}, st = w.status || {};
  if (w.kind === "DaemonSet") return st.desiredNumberScheduled ?? "";
  if (w.kind === "Job") return s.completions ?? 1;
  if (w.kind === "CronJob") return s.schedule || "";
  return s.replicas ?? 1;
}

function ready(w) {
  const st = w.status || {};
  if (w.kind === "DaemonSet") return st.numberReady ?? 0;
  if (w.kind === "Job") return st.succeeded ?? 0;
  if (w.kind === "CronJob") return (st.active || []).length;
  return st.readyReplicas ?? 0;
}

function renderTable(name) {
  const spec = TABLES[name];
  show("page-table");
  if (state.table === undefined || state.tableName !== name) {
    state.tableName = name;
    state.table = new VTable($("table"), spec.columns, { sort: spec.sort || 0, down: !!spec.down });
    state.table.filter = state.nextFilter || "";
    $("table-filter").value = state.table.filter;
    state.nextFilter = "";
  }
  const errors = spec.sources.map((s) => collection(s).error).filter(Boolean);
  $("table-title").textContent = spec.title;
  const rows = spec.rows();
  state.table.set(rows);
  $("table-count").textContent = errors.length ? errors.join("; ") :
    `${state.table.rows.length} of ${rows.length}${spec.sources.every((s) => collection(s).synced) ? "" : " (loading…)"}`;
}

async function renderPod(ns, name) {
  show("page-pod");
  const key = `${ns}/${name}`;
  if (state.podKey === key && Date.now() - state.podAt < 5000) return; // explained a moment ago
  state.podKey = key;
  state.podAt = Date.now();
  $("pod-title").textContent = `Pod ${key}`;
  $("pod-logs").setAttribute("href", `#/logs/${ns}/${name}`);
  $("pod-summary").textContent = "explaining…";
  $("pod-misses").textContent = "";
  let report;
  try {
    report = await api(`/corral/v1/namespaces/${encodeURIComponent(ns)}/pods/${encodeURIComponent(name)}/explain`);
  } catch (error) {
    if (!(error instanceof Unauthorized)) $("pod-summary").textContent = `Cannot explain: ${error.message}`;
    return;
  }
  if (state.podKey !== key) return;
  const pod = collection("pods").items.get(key);
  const bound = pod && pod.spec.nodeName;
  let text = `${report.message}`;
  if (bound) text += ` Bound to ${bound}; below: where it would go now.`;
  else if (report.chosen) text += ` Best node: ${report.chosen}.`;
  else text += " No node can take it: each node's reason is below.";
  if (report.chosen && report.runnerUp) {
    text += report.runnerUp.by === 0 ? ` Tied with ${report.runnerUp.node}.` :
      ` Ahead of the runner-up, ${report.runnerUp.node}, by ${+report.runnerUp.by.toFixed(2)}.`;
  }
  if (report.preemption && report.preemption.node) text += ` Preemption would nominate ${report.preemption.node}.`;
  $("pod-summary").textContent = text;
  $("pod-misses").textContent = (report.nearestMisses || []).length ? `Nearest: ${report.nearestMisses.join("; ")}` : "";
  const table = new VTable($("pod-table"), [
    { title: "Node", value: (n) => n.node },
    { title: "Result", value: (n) => (n.node === report.chosen ? "chosen" : n.feasible ? "feasible" : "rejected") },
    { title: "Score", value: (n) => (n.feasible ? +n.total.toFixed(2) : -1), text: (n) => (n.feasible ? +n.total.toFixed(2) : "-") },
    { title: "Plugin", value: (n) => (n.feasible ? "" : n.plugin) },
    { title: "Details", value: (n) => (n.feasible ? Object.entries(n.scores).map(([k, v]) => `${k}=${+v.toFixed(2)}`).join("  ")
                                                  : (n.reasons || []).join("; ")) },
  ], { sort: 2, down: true, rowClass: (n) => (n.node === report.chosen ? "chosen" : n.feasible ? "" : "rejected") });
  table.set(report.nodes);
}

async function renderLogs(ns, name, container) {
  show("page-logs");
  const key = `${ns}/${name}/${container || ""}`;
  if (state.logsKey === key) return;
  if (state.logsAbort) state.logsAbort.abort();
  state.logsKey = key;
  state.logsAbort = new AbortController();
  $("logs-title").textContent = `Logs of ${ns}/${name}${container ? " (" + container + ")" : ""}, following`;
  const out = $("logs-text");
  out.textContent = "";
  const query = new URLSearchParams({ follow: "true", tailLines: "1000" });
  if (container) query.set("container", container);
  try {
    const response = await fetch(`/api/v1/namespaces/${encodeURIComponent(ns)}/pods/${encodeURIComponent(name)}/log?${query}`,
                                 { headers: headers(false), signal: state.logsAbort.signal });
    if (!response.ok) {
      const body = await response.json().catch(() => ({}));
      out.textContent = `Cannot read the logs: ${body.message || response.status}`;
      return;
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      out.append(decoder.decode(value, { stream: true }));
      if (out.textContent.length > 1_000_000) out.textContent = out.textContent.slice(-500_000);
      out.scrollTop = out.scrollHeight;
    }
  } catch (error) {
    if (error.name !== "AbortError") out.append(`\n[${error.message}]`);
  }
}

function renderPlanPage() {
  show("page-plan");
  if (state.plan) drawPlan(state.plan);
}

async function runPlan() {
  const text = $("plan-text").value;
  $("plan-error").textContent = "";
  $("plan-summary").textContent = "planning…";
  try {
    state.plan = await api("/corral/v1/plan", { method: "POST", body: { manifests: text } });
  } catch (error) {
    if (error instanceof Unauthorized) return;
    state.plan = null;
    $("plan-summary").textContent = "";
    $("plan-map-wrap").hidden = true;
    $("plan-error").textContent = error.message;
    $("plan-table").replaceChildren();
    $("plan-pending").replaceChildren();
    return;
  }
  drawPlan(state.plan);
}

function drawPlan(plan) {
  const marks = new Map();
  for (const p of plan.pods) if (p.node && !p.exists) marks.set(p.node, (marks.get(p.node) || 0) + 1);
  $("plan-summary").textContent = `${plan.placed} pod(s) would be placed, ${plan.pending} would stay Pending` +
    (plan.preempted.length ? `, ${plan.preempted.length} would be preempted` : "") +
    ` (cluster at revision ${plan.resourceVersion}; plan version ${plan.planVersion}).`;
  const usage = usageByNode(collection("pods").items.values());
  for (const p of plan.pods) { // the plan's pods counted where they would land (as outlined tiles)
    if (!p.node || p.exists) continue;
    const u = usage.get(p.node) || { cpu: 0, memory: 0, pods: 0 };
    u.pods += 1;
    usage.set(p.node, u);
  }
  $("plan-map-wrap").hidden = false;
  drawMap($("plan-map"), [...collection("nodes").items.values()], usage, state.resource, marks);
  const placed = plan.pods.filter((p) => p.node);
  new VTable($("plan-table"), [
    { title: "Pod", value: (p) => p.pod },
    { title: "From", value: (p) => p.from },
    { title: "Node", value: (p) => p.node },
    { title: "Score", value: (p) => p.score ?? "" },
    { title: "Why", value: (p) => p.message || (p.runnerUp ? `ahead of ${p.runnerUp.node} by ${p.runnerUp.by}` : p.why || "") },
  ]).set(placed);
  const pending = plan.pods.filter((p) => !p.node);
  const box = $("plan-pending");
  box.replaceChildren();
  if (pending.length) {
    box.append(el("h2", { text: `Would stay Pending (${pending.length})` }));
    const list = el("ul");
    for (const p of pending) {
      const item = el("li", { text: `${p.pod} (${p.from}): ${p.message}` });
      if ((p.nearestMisses || []).length) item.append(el("div", { class: "misses", text: `nearest: ${p.nearestMisses.join("; ")}` }));
      list.append(item);
    }
    box.append(list);
  }
  for (const note of plan.notes || []) box.append(el("p", { text: `Note: ${note}` }));
}

// What each page watches. A browser keeps at most six connections to one server and every watch
// holds one open, so a page watches only what it shows and the others' watches are stopped.
const SOURCES = { map: ["nodes", "pods"], plan: ["nodes", "pods"], pod: ["pods"], logs: [] };

function render() {
  if (!state.token) return;
  const parts = (location.hash.replace(/^#\/?/, "") || "map").split("/").map(decodeURIComponent);
  state.page = parts[0];
  const needed = new Set(SOURCES[state.page] || (TABLES[state.page] || {}).sources || []);
  for (const [name, c] of state.collections) {
    if (!needed.has(name)) { c.stop(); state.collections.delete(name); }
  }
  if (state.page !== "logs" && state.logsAbort) { state.logsAbort.abort(); state.logsAbort = null; state.logsKey = ""; }
  if (state.page === "map") renderMap();
  else if (TABLES[state.page]) renderTable(state.page);
  else if (state.page === "pod" && parts.length >= 3) renderPod(parts[1], parts[2]);
  else if (state.page === "logs" && parts.length >= 3) renderLogs(parts[1], parts[2], parts[3]);
  else if (state.page === "plan") renderPlanPage();
  else location.hash = "#/map";
}

// --- logging in and out -----------------------------------------------------------------------

function tokenFrom(text) {
  const fromConfig = /^\s*token:\s*["']?([^"'\s]+)/m.exec(text);
  if (fromConfig) return fromConfig[1];
  const bare = text.trim();
  return /^[A-Za-z0-9._~+/=:-]+$/.test(bare) ? bare : "";
}

async function login() {
  const token = tokenFrom($("login-text").value);
  $("login-error").textContent = "";
  if (!token) {
    $("login-error").textContent = "No token found: paste a token, or a kubeconfig with a token: line (a client certificate cannot be used from a browser).";
    return;
  }
  state.token = token;
  try {
    await api("/api"); // discovery: any authenticated user may read it; 401 for a token the server refuses
  } catch (error) {
    state.token = "";
    $("login-error").textContent = error instanceof Unauthorized ? "The server refused this token." : error.message;
    return;
  }
  sessionStorage.setItem("corral.token", token);
  $("login-text").value = "";
  enter();
}

function enter() {
  $("login").hidden = true;
  $("nav").hidden = false;
  $("logout").hidden = false;
  render();
}

function logout(message) {
  for (const c of state.collections.values()) c.stop();
  state.collections.clear();
  state.token = "";
  state.table = undefined;
  sessionStorage.removeItem("corral.token");
  $("nav").hidden = true;
  $("logout").hidden = true;
  for (const section of document.querySelectorAll(".page")) section.hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message || "";
}

function start() {
  $("login-go").addEventListener("click", login);
  $("logout").addEventListener("click", () => logout(""));
  $("map-resource").addEventListener("change", (e) => { state.resource = e.target.value; render(); });
  $("table-filter").addEventListener("input", (e) => { if (state.table) { state.table.filter = e.target.value; state.table.refresh(); } });
  $("plan-go").addEventListener("click", runPlan);
  $("plan-file").addEventListener("change", async (e) => {
    const file = e.target.files[0];
    if (file) $("plan-text").value = await file.text();
  });
  const map = $("map"), tip = $("tip");
  map.addEventListener("mousemove", (e) => {
    const t = tileAt(map, e);
    if (!t) { tip.hidden = true; return; }
    tip.textContent = describeTile(t);
    tip.hidden = false;
    // Beside the pointer, kept inside the window (the map itself may be scrolled or small).
    const x = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 4);
    const y = Math.min(e.clientY + 14, window.innerHeight - tip.offsetHeight - 4);
    tip.style.left = `${Math.max(4, x)}px`;
    tip.style.top = `${Math.max(4, y)}px`;
  });
  map.addEventListener("mouseleave", () => { tip.hidden = true; });
  map.addEventListener("click", (e) => {
    const t = tileAt(map, e);
    if (t) { state.nextFilter = t.node.metadata.name; state.tableName = ""; location.hash = "#/pods"; }
  });
  window.addEventListener("hashchange", () => { state.podKey = ""; render(); });
  window.addEventListener("resize", () => changed());
  // For scripts and tests: where a node's tile is on the map now.
  window.corralTile = (name) => {
    const t = (map.tiles || []).find((x) => x.node.metadata.name === name);
    return t ? { x: t.x + t.size / 2, y: t.y + t.size / 2, left: t.x, top: t.y, size: t.size } : null;
  };
  if (state.token) enter(); else logout("");
}

start();
