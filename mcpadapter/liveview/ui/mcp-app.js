// The MCP App of graph-engineering-mcp (SEP-1865). It talks only to its
// host, over postMessage JSON-RPC (ui/initialize, then tools/call), and calls
// only graph_task_inspect, which is read-only: from the tool result the host
// hands it, it learns the workflow id and reads the workflow's outline
// (graph_task_inspect with workflow_id alone: every task, at most 1,000)
// with one call, draws the whole DAG with the live view's layout rules, and
// re-reads the outline every 5 seconds until every task is finished.
(function () {
  if (!document.body || document.body.getAttribute("data-page") !== "app") return;
  var REFRESH_MS = 5000;
  // Geometry and ordering of the live view's layout (ui_layout.go).
  var W = 176, H = 46, GX = 56, GY = 16, M = 20, SWEEPS = 4;
  var nextId = 1, pending = {}, stopped = false;
  var outline = null, handed = null, selected = null, ticking = [], timer = null, offset = 0, lastKey = "", reads = 0;
  var live = document.getElementById("live");
  document.documentElement.classList.add("js"); // shows the status line (style.css)
  function status(ok, text) { live.className = "live " + (ok ? "ok" : "err"); live.textContent = text; }
  function now() { return Date.now() + offset; }

  function send(msg) { window.parent.postMessage(msg, "*"); }
  function request(method, params) {
    var id = nextId++;
    return new Promise(function (resolve, reject) {
      pending[id] = { resolve: resolve, reject: reject };
      send({ jsonrpc: "2.0", id: id, method: method, params: params });
    });
  }
  function notify(method, params) { send({ jsonrpc: "2.0", method: method, params: params || {} }); }

  window.addEventListener("message", function (ev) {
    if (ev.source !== window.parent) return;
    var m = ev.data;
    if (!m || m.jsonrpc !== "2.0") return;
    if (m.method === undefined && m.id !== undefined) {
      var p = pending[m.id];
      if (!p) return;
      delete pending[m.id];
      if (m.error) p.reject(new Error(m.error.message || "error " + m.error.code));
      else p.resolve(m.result);
      return;
    }
    switch (m.method) {
      case "ui/notifications/tool-result": onToolResult(m.params); break;
      case "ui/resource-teardown": stopped = true; clearTimeout(timer); send({ jsonrpc: "2.0", id: m.id, result: {} }); break;
      case "ping": send({ jsonrpc: "2.0", id: m.id, result: {} }); break;
      default:
        if (m.id !== undefined && m.method) send({ jsonrpc: "2.0", id: m.id, error: { code: -32601, message: "method not found: " + m.method } });
    }
  });

  // readOutline reads the workflow's outline through the host:
  // graph_task_inspect only.
  function readOutline(workflowID) {
    reads++;
    return request("tools/call", { name: "graph_task_inspect", arguments: { workflow_id: workflowID } }).then(function (r) {
      if (!r || r.isError || !r.structuredContent || !r.structuredContent.workflow) {
        var text = r && r.content && r.content[0] && r.content[0].text;
        throw new Error(text || "graph_task_inspect gave no workflow");
      }
      return r.structuredContent.workflow;
    });
  }

  // layout places the outline's tasks as the live view does: a node's layer
  // is its longest dependency path (Kahn's algorithm in creation order; a
  // node on a cycle, which the store refuses, goes last), nodes within a
  // layer ordered by a few barycenter sweeps each way, layers centred
  // against the tallest.
  function layout(wf) {
    var n = wf.tasks.length, idx = {}, deps = [], succ = [], indeg = [], layer = [], nodes = [], edges = [];
    wf.tasks.forEach(function (t, i) { idx[t.node_id] = i; deps.push([]); succ.push([]); indeg.push(0); layer.push(0); });
    var readAt = Date.parse(wf.read_at);
    wf.tasks.forEach(function (t, i) {
      (t.depends_on || []).forEach(function (d) {
        var j = idx[d];
        if (j === undefined) return; // left out of a truncated outline
        deps[i].push(j); succ[j].push(i); indeg[i]++;
        edges.push([j, i]);
      });
      var exp = t.lease_expires_at ? Date.parse(t.lease_expires_at) : 0;
      nodes.push({ task_id: t.task_id, node_id: t.node_id, state: t.state, owner: t.owner || "", generation: t.generation,
        lease_expires_at_ms: t.state === "claimed" ? exp : 0,
        // A claim whose lease lapsed by the read: its holder stopped
        // heartbeating. The outline never expires it.
        stuck: t.state === "claimed" && exp > 0 && exp <= readAt,
        due_at_ms: t.due_at ? Date.parse(t.due_at) : 0, priority: t.priority, requires: t.requires || [],
        attempts: t.attempts, max_attempts: t.max_attempts, error: t.error || "", status_message: t.status_message || "",
        progress_done: t.report && t.report.progress ? t.report.progress.done : undefined,
        progress_total: t.report && t.report.progress ? t.report.progress.total : undefined,
        report_generation: t.report ? t.report.generation : 0, report_message: t.report ? t.report.status_message || "" : "" });
    });
    var queue = [], done = [];
    for (var i = 0; i < n; i++) if (indeg[i] === 0) queue.push(i);
    for (var k = 0; k < queue.length; k++) {
      var q = queue[k];
      done[q] = true;
      succ[q].forEach(function (s) {
        if (layer[q] + 1 > layer[s]) layer[s] = layer[q] + 1;
        if (--indeg[s] === 0) queue.push(s);
      });
    }
    var maxLayer = 0;
    for (i = 0; i < n; i++) if (done[i] && layer[i] > maxLayer) maxLayer = layer[i];
    for (i = 0; i < n; i++) if (!done[i]) layer[i] = maxLayer + 1;
    layer.forEach(function (l) { if (l > maxLayer) maxLayer = l; });
    var layers = [];
    for (i = 0; i <= (n ? maxLayer : -1); i++) layers.push([]);
    for (i = 0; i < n; i++) layers[layer[i]].push(i);
    var pos = [], bary = [];
    layers.forEach(function (ids) { ids.forEach(function (id, k) { pos[id] = k; }); });
    function reorder(ids, nb) {
      ids.forEach(function (id) {
        if (!nb[id].length) { bary[id] = pos[id]; return; }
        var sum = 0;
        nb[id].forEach(function (j) { sum += pos[j]; });
        bary[id] = sum / nb[id].length;
      });
      // A stable sort, as sort.SliceStable.
      var keyed = ids.map(function (id, k) { return [id, k]; });
      keyed.sort(function (a, b) { return bary[a[0]] - bary[b[0]] || a[1] - b[1]; });
      keyed.forEach(function (e, k) { ids[k] = e[0]; pos[e[0]] = k; });
    }
    for (var s = 0; s < SWEEPS; s++) {
      for (var l = 1; l < layers.length; l++) reorder(layers[l], deps);
      for (l = layers.length - 2; l >= 0; l--) reorder(layers[l], succ);
    }
    var tallest = 0;
    layers.forEach(function (ids) { if (ids.length > tallest) tallest = ids.length; });
    var height = 2 * M + tallest * H + Math.max(0, tallest - 1) * GY;
    layers.forEach(function (ids, l) {
      var span = ids.length * H + (ids.length - 1) * GY, top = M + Math.trunc((height - 2 * M - span) / 2);
      ids.forEach(function (id, k) { nodes[id].x = M + l * (W + GX); nodes[id].y = top + k * (H + GY); nodes[id].layer = l; });
    });
    return { workflow_id: wf.workflow_id, nodes: nodes, edges: edges, node_width: W, node_height: H,
      width: 2 * M + layers.length * W + Math.max(0, layers.length - 1) * GX, height: n ? height : 2 * M };
  }

  function render() {
    var t0 = performance.now(), wf = layout(outline);
    document.body.setAttribute("data-layout-ms", (performance.now() - t0).toFixed(1));
    document.getElementById("wf-id").textContent = wf.workflow_id;
    GE.countsBadges(document.getElementById("counts"), outline.counts, wf.nodes.filter(function (n) { return n.stuck; }).length);
    var total = 0;
    for (var s in outline.counts) total += outline.counts[s];
    var note = document.getElementById("truncated");
    note.hidden = !outline.truncated;
    note.textContent = outline.truncated ? "showing the first " + wf.nodes.length + " of " + total + " tasks" : "";
    ticking = [];
    var ms = GE.draw(document.getElementById("graph"), wf, { selected: selected, onSelect: select, now: now, ticking: ticking });
    document.body.setAttribute("data-render-ms", ms.toFixed(1));
    document.body.setAttribute("data-nodes", String(wf.nodes.length));
    document.body.setAttribute("data-rendered", String(Number(document.body.getAttribute("data-rendered") || 0) + 1));
    // How many reads the first drawing took (tests check it is one).
    if (!document.body.hasAttribute("data-first-draw-reads")) document.body.setAttribute("data-first-draw-reads", String(reads));
    var sel = wf.nodes.filter(function (n) { return n.task_id === selected; })[0];
    if (sel) showDetail(sel);
    notify("ui/notifications/size-changed", { width: document.documentElement.scrollWidth, height: document.documentElement.scrollHeight });
  }

  function when(ms) { return ms ? new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z") : ""; }

  function showDetail(n) {
    var d = document.getElementById("detail"), t = outline.tasks.filter(function (x) { return x.task_id === n.task_id; })[0];
    d.replaceChildren();
    d.setAttribute("data-task-id", n.task_id);
    d.appendChild(GE.el("h2", {}, n.node_id));
    var lease = "";
    if (n.state === "claimed") lease = n.stuck ? "lapsed " + GE.dur(now() - n.lease_expires_at_ms) + " ago (stuck)" : GE.dur(n.lease_expires_at_ms - now()) + " left";
    var dl = GE.el("dl");
    [["task", n.task_id], ["state", n.state + (n.stuck ? " (stuck)" : "")], ["holder", n.owner], ["generation", n.generation], ["lease", lease],
      ["attempts", n.attempts + " of " + n.max_attempts], ["priority", n.priority || ""], ["requires", n.requires.join(", ")],
      ["waiting until", n.due_at_ms > now() ? when(n.due_at_ms) + " (in " + GE.dur(n.due_at_ms - now()) + ")" : ""],
      ["depends on", (t.depends_on || []).join(", ")], ["error", n.error], ["status", n.status_message],
      ["progress", n.progress_done === undefined ? "" : n.progress_done + (n.progress_total !== undefined ? " of " + n.progress_total : "")],
      ["worker says", n.report_message]].forEach(function (p) {
      if (p[1] === null || p[1] === undefined || p[1] === "") return;
      dl.appendChild(GE.el("dt", {}, p[0]));
      dl.appendChild(GE.el("dd", {}, p[1]));
    });
    d.appendChild(dl);
    // The task the host handed over carries its result; the outline does not.
    if (handed && handed.task_id === n.task_id && handed.result !== null && handed.result !== undefined) {
      d.appendChild(GE.el("h3", {}, "result"));
      d.appendChild(GE.el("pre", {}, GE.clip(JSON.stringify(handed.result), 4096)));
    }
  }

  function select(id) { selected = id; render(); }

  function finished(wf) {
    return !wf.counts.blocked && !wf.counts.pending && !wf.counts.claimed;
  }

  // show takes a fresh outline: it redraws when anything but the read time
  // changed, and schedules the next read unless every task is finished.
  function show(wf) {
    offset = Date.parse(wf.read_at) - Date.now();
    var key = JSON.stringify([wf.counts, wf.tasks, wf.truncated]);
    outline = wf;
    if (key !== lastKey) { lastKey = key; render(); }
    clearTimeout(timer);
    if (finished(wf)) { status(true, "finished"); return; }
    status(true, "live");
    timer = setTimeout(refresh, REFRESH_MS);
  }

  function refresh() {
    if (stopped || !outline) return;
    readOutline(outline.workflow_id).then(function (wf) { if (!stopped) show(wf); }).catch(function (e) {
      status(false, e.message + "; retrying");
      timer = setTimeout(refresh, REFRESH_MS);
    });
  }

  function onToolResult(result) {
    var sc = result && result.structuredContent;
    var wfID = sc && (sc.workflow ? sc.workflow.workflow_id : sc.task && sc.task.workflow_id);
    if (!wfID) { status(false, "this tool result has no task or workflow to show"); return; }
    handed = sc.task || null;
    selected = handed ? handed.task_id : null;
    outline = null; lastKey = "";
    clearTimeout(timer);
    // An outline result is drawn as it is; a task's result (create or
    // inspect) names the workflow to read.
    if (sc.workflow) { show(sc.workflow); return; }
    status(true, "reading the workflow…");
    readOutline(wfID).then(function (wf) { if (!stopped) show(wf); }).catch(function (e) {
      status(false, e.message);
      outline = { workflow_id: wfID };
      timer = setTimeout(refresh, REFRESH_MS);
    });
  }

  setInterval(function () { GE.tick(ticking, now(), true); }, 1000);
  request("ui/initialize", { appCapabilities: {}, appInfo: { name: "graph-engineering-workflow", version: "1" }, protocolVersion: "2026-01-26" })
    .then(function () { notify("ui/notifications/initialized"); status(true, "connected"); })
    .catch(function (e) { status(false, "the host refused ui/initialize: " + e.message); });
})();
