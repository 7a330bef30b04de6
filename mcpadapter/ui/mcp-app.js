// The MCP App of graph-engineering-mcp (SEP-1865). It talks only to its
// host, over postMessage JSON-RPC (ui/initialize, then tools/call), and calls
// only graph_task_inspect, which is read-only: from the task of the tool
// result the host hands it, it inspects the dependencies, transitively (at
// most 200 tasks), draws that part of the workflow and re-inspects the
// unfinished tasks every 5 seconds.
(function () {
  if (!document.body || document.body.getAttribute("data-page") !== "app") return;
  var MAX_TASKS = 200, PARALLEL = 4, REFRESH_MS = 5000;
  var nextId = 1, pending = {}, stopped = false;
  var tasks = {}, order = [], selected = null, ticking = [], timer = null;
  var live = document.getElementById("live");
  function status(ok, text) { live.className = "live " + (ok ? "ok" : "err"); live.textContent = text; }

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

  // inspect reads one task through the host: graph_task_inspect only.
  function inspect(taskID) {
    return request("tools/call", { name: "graph_task_inspect", arguments: { task_id: taskID } }).then(function (r) {
      if (!r || r.isError || !r.structuredContent || !r.structuredContent.task) {
        var text = r && r.content && r.content[0] && r.content[0].text;
        throw new Error(text || "graph_task_inspect gave no task");
      }
      return r.structuredContent;
    });
  }

  function remember(sc) {
    var t = sc.task;
    if (!tasks[t.task_id]) order.push(t.task_id);
    tasks[t.task_id] = { task: t, deps: sc.dependencies || [] };
  }

  // explore inspects ids and, transitively, their dependencies, PARALLEL at
  // a time, at most MAX_TASKS tasks in all.
  function explore(ids) {
    var queue = ids.slice(), seen = {}, running = 0;
    ids.forEach(function (id) { seen[id] = true; });
    return new Promise(function (resolve) {
      function pump() {
        if (stopped) return resolve();
        while (running < PARALLEL && queue.length) {
          var id = queue.shift();
          running++;
          inspect(id).then(function (sc) {
            remember(sc);
            sc.dependencies.forEach(function (d) {
              if (!seen[d.task_id] && !tasks[d.task_id] && order.length + queue.length < MAX_TASKS) { seen[d.task_id] = true; queue.push(d.task_id); }
            });
          }).catch(function (e) { status(false, e.message); }).then(function () { running--; pump(); });
        }
        if (running === 0 && queue.length === 0) resolve();
      }
      pump();
    });
  }

  function layout() {
    var idx = {}, nodes = [], edges = [];
    order.forEach(function (id, i) { idx[id] = i; });
    order.forEach(function (id) {
      var t = tasks[id].task, exp = t.lease_expires_at ? Date.parse(t.lease_expires_at) : 0;
      nodes.push({ task_id: t.task_id, node_id: t.node_id, state: t.state, owner: t.owner || "", generation: t.generation,
        // Never stuck here: inspect expires a lapsed lease before it answers,
        // and the countdown runs on this viewer's clock, not the server's.
        lease_expires_at_ms: t.state === "claimed" ? exp : 0, stuck: false,
        attempts: t.attempts, max_attempts: t.max_attempts, error: t.error || "", status_message: t.status_message || "" });
    });
    order.forEach(function (id, i) {
      tasks[id].deps.forEach(function (d) { if (idx[d.task_id] !== undefined) edges.push([idx[d.task_id], i]); });
    });
    // Longest-path layers, dependencies first (they were inspected after
    // their dependents, so iterate until stable; the graph is a DAG).
    var layer = nodes.map(function () { return 0; }), changed = true, rounds = 0;
    while (changed && rounds++ <= nodes.length) {
      changed = false;
      edges.forEach(function (e) { if (layer[e[1]] < layer[e[0]] + 1) { layer[e[1]] = layer[e[0]] + 1; changed = true; } });
    }
    var W = 176, H = 46, GX = 56, GY = 16, M = 20, rows = [];
    nodes.forEach(function (n, i) { (rows[layer[i]] = rows[layer[i]] || []).push(i); });
    var tallest = 0;
    rows.forEach(function (r) { if (r && r.length > tallest) tallest = r.length; });
    var height = 2 * M + tallest * H + Math.max(0, tallest - 1) * GY;
    rows.forEach(function (r, l) {
      if (!r) return;
      var span = r.length * H + (r.length - 1) * GY, top = M + (height - 2 * M - span) / 2;
      r.forEach(function (i, k) { nodes[i].x = M + l * (W + GX); nodes[i].y = top + k * (H + GY); nodes[i].layer = l; });
    });
    var root = order.length ? tasks[order[0]].task : null;
    return { workflow_id: root ? root.workflow_id : "", nodes: nodes, edges: edges, node_width: W, node_height: H,
      width: 2 * M + rows.length * W + Math.max(0, rows.length - 1) * GX, height: height };
  }

  function render() {
    var wf = layout(), counts = {};
    wf.nodes.forEach(function (n) { counts[n.state] = (counts[n.state] || 0) + 1; });
    document.getElementById("wf-id").textContent = wf.workflow_id;
    GE.countsBadges(document.getElementById("counts"), counts, wf.nodes.filter(function (n) { return n.stuck; }).length);
    ticking = [];
    GE.draw(document.getElementById("graph"), wf, { selected: selected, onSelect: select, now: Date.now, ticking: ticking });
    document.body.setAttribute("data-nodes", String(wf.nodes.length));
    document.body.setAttribute("data-rendered", String(Number(document.body.getAttribute("data-rendered") || 0) + 1));
    if (selected && tasks[selected]) showDetail(tasks[selected]);
    notify("ui/notifications/size-changed", { width: document.documentElement.scrollWidth, height: document.documentElement.scrollHeight });
  }

  function showDetail(entry) {
    var t = entry.task, d = document.getElementById("detail");
    d.replaceChildren();
    d.setAttribute("data-task-id", t.task_id);
    d.appendChild(GE.el("h2", {}, t.node_id));
    var dl = GE.el("dl");
    [["task", t.task_id], ["state", t.state], ["holder", t.owner], ["generation", t.generation], ["lease expires", t.state === "claimed" ? t.lease_expires_at : ""],
      ["attempts", t.attempts + " of " + t.max_attempts], ["depends on", (t.depends_on || []).join(", ")], ["error", t.error], ["status", t.status_message],
      ["updated", t.updated_at]].forEach(function (p) {
      if (p[1] === null || p[1] === undefined || p[1] === "") return;
      dl.appendChild(GE.el("dt", {}, p[0]));
      dl.appendChild(GE.el("dd", {}, p[1]));
    });
    d.appendChild(dl);
    if (t.result !== null && t.result !== undefined) { d.appendChild(GE.el("h3", {}, "result")); d.appendChild(GE.el("pre", {}, GE.clip(JSON.stringify(t.result), 4096))); }
  }

  function select(id) { selected = id; render(); }

  function refresh() {
    if (stopped) return;
    var open = order.filter(function (id) { var s = tasks[id].task.state; return s !== "completed" && s !== "failed" && s !== "cancelled"; });
    if (!open.length) { status(true, "finished"); return; }
    var before = JSON.stringify(order.map(function (id) { return tasks[id].task; }));
    var queue = open.slice(), running = 0;
    function pump() {
      while (running < PARALLEL && queue.length) {
        running++;
        inspect(queue.shift()).then(remember).catch(function (e) { status(false, e.message); }).then(function () {
          running--;
          if (queue.length) return pump();
          if (running === 0) {
            if (JSON.stringify(order.map(function (id) { return tasks[id].task; })) !== before) render();
            status(true, "live");
            timer = setTimeout(refresh, REFRESH_MS);
          }
        });
      }
    }
    pump();
  }

  function onToolResult(result) {
    var sc = result && result.structuredContent;
    if (!sc || !sc.task) { status(false, "this tool result has no task to show"); return; }
    tasks = {}; order = [];
    selected = sc.task.task_id;
    status(true, "reading the workflow…");
    // An inspect result carries the dependencies; a create result does not,
    // so the App inspects its task first.
    var start = [sc.task.task_id];
    if (sc.dependencies) {
      remember(sc);
      start = sc.dependencies.map(function (d) { return d.task_id; });
    }
    explore(start).then(function () {
      render();
      status(true, "live");
      clearTimeout(timer);
      timer = setTimeout(refresh, REFRESH_MS);
    });
  }

  setInterval(function () { GE.tick(ticking, Date.now(), false); }, 1000);
  request("ui/initialize", { appCapabilities: {}, appInfo: { name: "graph-engineering-workflow", version: "1" }, protocolVersion: "2026-01-26" })
    .then(function () { notify("ui/notifications/initialized"); status(true, "connected"); })
    .catch(function (e) { status(false, "the host refused ui/initialize: " + e.message); });
})();
