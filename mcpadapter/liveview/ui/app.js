// The live workflow view of graph-engineering-mcp. Plain script, no
// libraries, nothing loaded from anywhere but this server. It reads: it
// polls the JSON under /ui/api/ (an unchanged answer is a 304) and redraws
// what changed. Its one write: a viewer with the approve role approves or
// rejects the gates awaiting a decision (a POST carrying the session's
// anti-forgery token from /ui/api/me). The workflow page is pushed: an event stream says
// when the workflow changed, and only then is its JSON fetched; it polls
// only while the stream is unavailable.
"use strict";

var GE = (function () {
  var SVG = "http://www.w3.org/2000/svg";

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function sv(tag, attrs, text) {
    var e = document.createElementNS(SVG, tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function clip(s, n) { s = String(s || ""); return s.length > n ? s.slice(0, n - 1) + "…" : s; }

  function dur(ms) {
    var neg = ms < 0; ms = Math.abs(ms);
    var s = Math.floor(ms / 1000), out;
    if (s < 60) out = s + "s";
    else if (s < 3600) out = Math.floor(s / 60) + "m" + (s % 60 ? " " + (s % 60) + "s" : "");
    else if (s < 86400) out = Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
    else out = Math.floor(s / 86400) + "d " + Math.floor((s % 86400) / 3600) + "h";
    return neg ? "-" + out : out;
  }

  // leaseText is the second line of a claimed node: holder, generation and
  // the lease's countdown at server time now.
  function infoText(n, now) {
    if (n.state === "claimed") {
      var left = (n.lease_expires_at_ms || 0) - now;
      if (n.stuck) return "⚠ stuck: " + clip(n.owner, 14) + " g" + n.generation + ", " + dur(-left) + " late";
      var p = progressText(n);
      if (p) return clip(n.owner, 12) + " · " + p + " · " + (left <= 0 ? "lease due" : dur(left));
      if (left <= 0) return clip(n.owner, 16) + " g" + n.generation + " · lease due";
      return clip(n.owner, 16) + " g" + n.generation + " · lease " + dur(left);
    }
    if (n.state === "failed") return "✗ " + clip(n.error || n.status_message || "failed", 28);
    if (n.state === "cancelled") return "⊘ " + clip(n.status_message || "cancelled", 28);
    if (n.state === "completed") return "✓ completed" + (n.attempts > 1 ? " (attempt " + n.attempts + ")" : "");
    if (n.state === "pending" && n.due_at_ms > now) return "⏱ waiting " + dur(n.due_at_ms - now);
    if (n.awaiting_approval) return "✋ awaiting approval" + (n.decide_by_ms > now ? " · " + dur(n.decide_by_ms - now) : "");
    // Attempts made so far, as tasks list and tasks show count them.
    return n.state + (n.attempts ? " · attempts " + n.attempts + "/" + n.max_attempts : "");
  }

  // progressText is the progress the current claim of n reported: "30%"
  // of a total, else the count done; "" when it reported none.
  function progressText(n) {
    if (n.progress_done === undefined || n.report_generation !== n.generation) return "";
    if (n.progress_total > 0) return Math.floor(n.progress_done * 100 / n.progress_total) + "%";
    if (n.progress_total === undefined) return n.progress_done + " done";
    return "";
  }

  // usageText is reported usage as text.
  function usageText(u) {
    if (!u) return "";
    return u.input_tokens + " in / " + u.output_tokens + " out tokens, $" + u.cost_usd;
  }

  // draw renders a laid-out workflow (nodes with x, y; edges as index
  // pairs) as SVG into container, replacing what was there. opts.selected
  // is the selected task id, opts.onSelect(task_id) is called on a click.
  function draw(container, wf, opts) {
    var t0 = performance.now();
    var w = wf.node_width, h = wf.node_height;
    var svg = sv("svg", { width: wf.width, height: wf.height, viewBox: "0 0 " + wf.width + " " + wf.height, id: "dag", role: "img" });
    svg.appendChild(sv("title", {}, "DAG of workflow " + wf.workflow_id));
    var edges = sv("g", { "class": "edges" });
    var hot = {};
    if (opts.selected) hot[opts.selected] = true;
    wf.edges.forEach(function (e) {
      var a = wf.nodes[e[0]], b = wf.nodes[e[1]];
      var x1 = a.x + w, y1 = a.y + h / 2, x2 = b.x, y2 = b.y + h / 2, mx = (x1 + x2) / 2;
      var cls = "edge" + (hot[a.task_id] || hot[b.task_id] ? " hot" : "");
      edges.appendChild(sv("path", { "class": cls, d: "M" + x1 + "," + y1 + " C" + mx + "," + y1 + " " + mx + "," + y2 + " " + x2 + "," + y2,
        "data-from": a.node_id, "data-to": b.node_id }));
    });
    svg.appendChild(edges);
    var nodes = sv("g", { "class": "nodes" });
    var now = opts.now();
    wf.nodes.forEach(function (n) {
      var cls = "node " + n.state + (n.stuck ? " stuck" : "") + (n.task_id === opts.selected ? " selected" : "");
      var g = sv("g", { "class": cls, transform: "translate(" + n.x + "," + n.y + ")", "data-node-id": n.node_id,
        "data-task-id": n.task_id, "data-state": n.state, "data-stuck": n.stuck ? "true" : "false", tabindex: "0" });
      g.appendChild(sv("title", {}, n.node_id + " (" + n.state + ")" + (n.error ? ": " + n.error : n.status_message ? ": " + n.status_message : "") +
        (n.report_message ? " — " + n.report_message : "")));
      g.appendChild(sv("rect", { width: w, height: h }));
      g.appendChild(sv("rect", { "class": "stripe", width: 6, height: h }));
      g.appendChild(sv("text", { "class": "id", x: 12, y: 18 }, clip(n.node_id, 24)));
      var info = sv("text", { "class": "info", x: 12, y: 36 }, infoText(n, now));
      g.appendChild(info);
      if (n.state === "claimed") opts.ticking.push({ n: n, text: info, g: g });
      g.addEventListener("click", function () { opts.onSelect(n.task_id); });
      g.addEventListener("keydown", function (ev) { if (ev.key === "Enter") opts.onSelect(n.task_id); });
      nodes.appendChild(g);
    });
    svg.appendChild(nodes);
    // A workflow up to 1.6 times wider than the pane is shrunk to fit it
    // (a 12-node workflow at 1400 px); a wider one scrolls at full size.
    if (container.clientWidth && wf.width <= 1.6 * container.clientWidth) {
      svg.classList.add("fit");
    }
    container.replaceChildren(svg);
    return performance.now() - t0;
  }

  // tick updates the lease countdowns without a redraw; with markStuck a
  // lease that runs out on the page (at server time) is marked stuck until
  // the server says otherwise.
  function tick(ticking, now, markStuck) {
    ticking.forEach(function (k) {
      if (markStuck && !k.n.stuck && (k.n.lease_expires_at_ms || 0) <= now) {
        k.n.stuck = true;
        k.g.classList.add("stuck");
        k.g.setAttribute("data-stuck", "true");
      }
      k.text.textContent = infoText(k.n, now);
    });
  }

  function countsBadges(parent, counts, stuck) {
    parent.replaceChildren();
    ["blocked", "pending", "claimed", "completed", "failed", "cancelled"].forEach(function (s) {
      if (counts[s]) parent.appendChild(el("span", { "class": "badge " + s, "data-state": s }, counts[s] + " " + s));
    });
    if (stuck) parent.appendChild(el("span", { "class": "badge stuck" }, stuck + " stuck"));
  }

  return { el: el, sv: sv, draw: draw, tick: tick, dur: dur, clip: clip, countsBadges: countsBadges, infoText: infoText,
    progressText: progressText, usageText: usageText };
})();

(function () {
  var page = document.body && document.body.getAttribute("data-page");
  if (page !== "index" && page !== "workflow") return; // embedded elsewhere (the MCP App)
  var offset = 0; // server time - local time, from the last answer
  function now() { return Date.now() + offset; }
  var live = document.getElementById("live");
  document.documentElement.classList.add("js"); // shows "connecting…" (style.css)
  function status(ok, text) { live.className = "live " + (ok ? "ok" : "err"); live.textContent = text; }

  // poller fetches url every interval (the answer's poll_ms), sending the
  // last ETag; onData runs on a changed answer. Errors back off to 30 s.
  // With manual set it fetches once, then only when asked (fetchNow), but
  // for retries after an error; setManual switches between the two.
  function poller(url, onData, manual) {
    var etag = null, delay = 1000, timer = null, stopped = false, busy = false, again = false;
    function schedule(failed) {
      clearTimeout(timer);
      if (stopped || (manual && !failed)) return;
      timer = setTimeout(run, delay);
    }
    function run() {
      if (busy) { again = true; return; }
      busy = true;
      clearTimeout(timer);
      var failed = false;
      var headers = {};
      if (etag) headers["If-None-Match"] = etag;
      fetch(url, { headers: headers, credentials: "same-origin", cache: "no-store" }).then(function (r) {
        if (r.status === 304) { status(true, "live"); delay = Math.max(delay, 500); return null; }
        if (!r.ok) {
          return r.json().catch(function () { return {}; }).then(function (b) {
            throw new Error(r.status + (b && b.error ? ": " + b.error : ""));
          });
        }
        etag = r.headers.get("ETag");
        return r.json();
      }).then(function (d) {
        if (d) {
          offset = d.now_ms - Date.now();
          delay = d.poll_ms || 1000;
          status(true, "live");
          onData(d);
        }
      }).catch(function (e) {
        failed = true;
        status(false, "disconnected (" + e.message + "), retrying");
        delay = Math.min(delay * 2, 30000);
      }).then(function () {
        busy = false;
        if (again && !stopped) { again = false; run(); return; }
        schedule(failed);
      });
    }
    run();
    return { stop: function () { stopped = true; clearTimeout(timer); }, refresh: function () { etag = null; clearTimeout(timer); run(); },
      fetchNow: function () { if (!stopped) run(); },
      setManual: function (m) { manual = m; if (!m && !busy) schedule(false); else if (m) clearTimeout(timer); } };
  }

  // pushed follows url through its event stream: one fetch at first, then
  // one each time the stream says the version moved. When the stream
  // fails or the server ends it, the page polls, and opens the stream
  // again after a while (the browser's own reconnection is not relied on:
  // a server that is gone would be retried forever without a poll).
  // others() returns the other pollers that follow the same stream (the
  // selected task's detail), or none.
  function pushed(url, eventsURL, onData, others) {
    var p = poller(url, onData, true), es = null, reopen = null;
    function each(f) { [p].concat(others ? others() : []).forEach(f); }
    document.body.setAttribute("data-mode", "connecting");
    function fallBack(why) {
      if (es) { es.close(); es = null; }
      document.body.setAttribute("data-mode", "polling");
      each(function (q) { q.setManual(false); });
      clearTimeout(reopen);
      reopen = setTimeout(open, 30000);
      if (why) status(false, why);
    }
    function open() {
      if (typeof EventSource === "undefined") { fallBack(""); return; }
      es = new EventSource(eventsURL, { withCredentials: true });
      es.onopen = function () {
        each(function (q) { q.setManual(true); });
        document.body.setAttribute("data-mode", "pushed");
        status(true, "live");
      };
      es.addEventListener("version", function () {
        document.body.setAttribute("data-events", String(Number(document.body.getAttribute("data-events") || 0) + 1));
        each(function (q) { q.fetchNow(); });
      });
      es.addEventListener("shutdown", function () { fallBack("the server is shutting down; polling"); });
      es.addEventListener("unauthorized", function () { fallBack(""); p.fetchNow(); });
      es.onerror = function () { fallBack(""); };
    }
    open();
  }

  if (page === "index") {
    var tbody = document.querySelector("#workflows tbody"), logout = document.getElementById("logout");
    logout.addEventListener("click", function () {
      fetch("/ui/logout", { method: "POST", credentials: "same-origin" }).then(function () { location.reload(); });
    });
    // The filter and the page live in the address (?q=…&page=…), so a
    // list can be shared and survives a reload.
    var params = new URLSearchParams(location.search);
    var state = { q: params.get("q") || "", page: Math.max(0, parseInt(params.get("page") || "0", 10) || 0) };
    var filter = document.getElementById("filter"), prev = document.getElementById("prev"), next = document.getElementById("next");
    filter.value = state.q;
    var list = null, typing = null;
    function listURL() {
      var p = new URLSearchParams();
      if (state.q) p.set("q", state.q);
      if (state.page) p.set("page", String(state.page));
      var s = p.toString();
      return s ? "?" + s : "";
    }
    function follow() {
      if (list) list.stop();
      history.replaceState(null, "", "/ui/" + listURL());
      list = poller("/ui/api/workflows" + listURL(), showList);
    }
    filter.addEventListener("input", function () {
      clearTimeout(typing);
      typing = setTimeout(function () { state.q = filter.value; state.page = 0; follow(); }, 250);
    });
    prev.addEventListener("click", function () { state.page = Math.max(0, state.page - 1); follow(); });
    next.addEventListener("click", function () { state.page++; follow(); });
    function showList(d) {
      var first = d.page * d.page_size;
      document.getElementById("pageinfo").textContent = d.matched === 0 ? "" :
        (first + 1) + "–" + Math.min(first + d.page_size, d.matched) + " of " + d.matched + ", most recently changed first";
      prev.hidden = d.page === 0;
      next.hidden = !d.truncated;
      document.getElementById("who").textContent = d.principal ? "as " + d.principal : "";
      logout.hidden = !d.principal;
      tbody.replaceChildren();
      d.workflows.forEach(function (w) {
        var tr = GE.el("tr", { "data-workflow-id": w.workflow_id });
        var a = GE.el("a", { href: "/ui/workflows/" + encodeURIComponent(w.workflow_id) }, w.workflow_id);
        var td = GE.el("td"); td.appendChild(a); tr.appendChild(td);
        tr.appendChild(GE.el("td", {}, w.total));
        var c = GE.el("td"); GE.countsBadges(c, w.counts, 0); tr.appendChild(c);
        tr.appendChild(GE.el("td", { "class": w.stuck ? "err" : "" }, w.stuck || ""));
        tr.appendChild(GE.el("td", {}, GE.dur(d.now_ms - w.created_at_ms)));
        tr.appendChild(GE.el("td", {}, GE.dur(d.now_ms - w.updated_at_ms) + " ago"));
        tbody.appendChild(tr);
      });
      var empty = document.getElementById("empty");
      empty.hidden = d.workflows.length > 0;
      empty.textContent = d.matched > 0 ? "No workflows on this page." : d.query ? "No workflow id contains \u201c" + d.query + "\u201d." : "No workflows yet.";
      document.getElementById("truncated").hidden = !d.truncated;
      document.body.setAttribute("data-rendered", String(Number(document.body.getAttribute("data-rendered") || 0) + 1));
    }
    follow();
    return;
  }

  var id = decodeURIComponent(location.pathname.slice("/ui/workflows/".length));
  document.getElementById("wf-id").textContent = id;
  document.title = id + " · graph-engineering-mcp";
  var graph = document.getElementById("graph"), detail = document.getElementById("detail");
  var selected = null, last = null, ticking = [], detailPoll = null;
  // me says whether this viewer may decide gates, with the session's
  // anti-forgery token; until it is known, no decision is offered.
  var me = null, gatesBar = document.getElementById("gates"), gatesKey = null, reasons = {};
  fetch("/ui/api/me", { credentials: "same-origin", cache: "no-store" }).then(function (r) { return r.ok ? r.json() : null; })
    .then(function (m) {
      me = m;
      document.body.setAttribute("data-can-decide-gates", m && m.can_decide_gates ? "true" : "false");
      if (last) render();
    }).catch(function () {});

  // showGates lists the gates awaiting approval with approve and reject,
  // for a viewer who may decide them. It rebuilds only when that list
  // changes, so a reason being typed survives a redraw.
  function showGates() {
    var awaiting = me && me.can_decide_gates ? last.nodes.filter(function (n) { return n.awaiting_approval; }) : [];
    var key = awaiting.map(function (n) { return n.task_id; }).join(" ");
    if (key === gatesKey) return;
    gatesKey = key;
    gatesBar.replaceChildren();
    gatesBar.hidden = awaiting.length === 0;
    awaiting.forEach(function (n) {
      var row = GE.el("div", { "class": "gate", "data-task-id": n.task_id, "data-node-id": n.node_id });
      var reason = GE.el("input", { "class": "reason", type: "text", maxlength: "4096", placeholder: "reason (optional)", "aria-label": "reason for " + n.node_id });
      reason.value = reasons[n.task_id] || "";
      reason.addEventListener("input", function () { reasons[n.task_id] = reason.value; });
      var approve = GE.el("button", { "class": "approve", type: "button" }, "Approve");
      var reject = GE.el("button", { "class": "reject", type: "button" }, "Reject");
      var msg = GE.el("span", { "class": "gate-msg" });
      function decide(verb) {
        approve.disabled = reject.disabled = true;
        msg.className = "gate-msg"; msg.textContent = verb === "approve" ? "approving…" : "rejecting…";
        fetch("/ui/api/gates/" + encodeURIComponent(n.task_id) + "/" + verb, {
          method: "POST", credentials: "same-origin", cache: "no-store",
          headers: { "Content-Type": "application/json", "X-CSRF-Token": me.csrf_token },
          body: JSON.stringify({ reason: reason.value })
        }).then(function (r) {
          return r.json().catch(function () { return {}; }).then(function (b) {
            if (!r.ok) throw new Error(b && b.error ? b.error : "HTTP " + r.status);
            return b;
          });
        }).then(function () {
          delete reasons[n.task_id];
          msg.className = "gate-msg ok"; msg.textContent = verb === "approve" ? "approved" : "rejected";
          gatesBar.setAttribute("data-decided", String(Number(gatesBar.getAttribute("data-decided") || 0) + 1));
        }).catch(function (e) {
          approve.disabled = reject.disabled = false;
          msg.className = "gate-msg err"; msg.textContent = e.message;
        });
      }
      approve.addEventListener("click", function () { decide("approve"); });
      reject.addEventListener("click", function () { decide("reject"); });
      row.append(GE.el("span", { "class": "gate-label" }, "✋ " + n.node_id + " awaits approval"), reason, approve, reject, msg);
      gatesBar.appendChild(row);
    });
  }

  function render() {
    ticking = [];
    var stuck = last.nodes.filter(function (n) { return n.stuck; }).length;
    var counts = document.getElementById("counts");
    GE.countsBadges(counts, last.counts, stuck);
    if (last.usage) counts.appendChild(GE.el("span", { "class": "badge usage", id: "usage" }, GE.usageText(last.usage)));
    // Why nothing here is claimable: an operator's pause (issue 27).
    if (last.paused) counts.appendChild(GE.el("span", { "class": "badge paused", "id": "paused", "title": last.paused }, "⏸ " + last.paused));
    showGates();
    var ms = GE.draw(graph, last, { selected: selected, onSelect: select, now: now, ticking: ticking });
    document.body.setAttribute("data-render-ms", ms.toFixed(1));
    document.body.setAttribute("data-nodes", String(last.nodes.length));
    document.body.setAttribute("data-rendered", String(Number(document.body.getAttribute("data-rendered") || 0) + 1));
  }

  function dl(pairs) {
    var d = GE.el("dl");
    pairs.forEach(function (p) {
      if (p[1] === undefined || p[1] === null || p[1] === "") return;
      d.appendChild(GE.el("dt", {}, p[0]));
      d.appendChild(GE.el("dd", p[2] ? { "class": p[2] } : {}, p[1]));
    });
    return d;
  }
  function when(ms) { return ms ? new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z") : ""; }
  // readable shows an event detail's times ("lease_expires_at_ms":
  // 1764547230000) as times ("lease_expires_at": "2026-… Z").
  function readable(detail) {
    return detail.replace(/"(\w+_at)_ms":(\d{10,16})/g, function (_, k, ms) { return '"' + k + '":"' + when(Number(ms)) + '"'; });
  }

  function showDetail(d) {
    var t = d.task;
    detail.replaceChildren();
    detail.setAttribute("data-task-id", t.task_id);
    detail.appendChild(GE.el("h2", {}, t.node_id));
    var lease = "";
    if (t.state === "claimed") lease = t.stuck ? "lapsed " + GE.dur(d.now_ms - t.lease_expires_at_ms) + " ago (stuck)" : GE.dur(t.lease_expires_at_ms - d.now_ms) + " left";
    detail.appendChild(dl([
      ["task", t.task_id], ["state", t.state + (t.stuck ? " (stuck)" : "") + (t.awaiting_approval ? " (awaiting approval)" : ""), t.stuck ? "err" : ""], ["holder", t.owner],
      ["gate", t.gate ? (t.awaiting_approval ? "awaiting approval: " + (me && me.can_decide_gates ? "Approve or Reject above, " : "") + "admin approve|reject " + t.task_id + ", or POST /gates/" + t.task_id + "/approve|reject" + (t.decide_by_ms > d.now_ms ? "; decided by the server " + when(t.decide_by_ms) : "") : "approval gate") : ""],
      ["generation", t.generation], ["lease", lease],
      ["last heartbeat", d.last_heartbeat_at_ms ? GE.dur(d.now_ms - d.last_heartbeat_at_ms) + " ago" : ""],
      ["attempts", t.attempts + " of " + t.max_attempts], ["priority", t.priority || ""],
      ["requires", (t.requires || []).join(", ")], ["concurrency key", t.concurrency_key || ""],
      ["waiting until", t.due_at_ms > d.now_ms ? when(t.due_at_ms) + " (in " + GE.dur(t.due_at_ms - d.now_ms) + ")" : ""],
      ["depends on", d.depends_on.join(", ")], ["created by", d.created_by],
      ["error", t.error, "err"], ["status", t.status_message],
      ["progress", t.progress_done === undefined ? "" : t.progress_done + (t.progress_total !== undefined ? " of " + t.progress_total : "") + " (generation " + t.report_generation + ")"],
      ["worker says", t.report_message], ["usage", GE.usageText(t.usage)],
      ["created", when(d.created_at_ms)], ["updated", when(d.updated_at_ms)]
    ]));
    if (d.payload && d.payload !== "{}") { detail.appendChild(GE.el("h3", {}, "payload")); detail.appendChild(GE.el("pre", {}, d.payload)); }
    if (d.result) { detail.appendChild(GE.el("h3", {}, "result")); detail.appendChild(GE.el("pre", {}, d.result)); }
    detail.appendChild(GE.el("h3", {}, "history" + (d.events_omitted ? " (latest " + d.events.length + ", " + d.events_omitted + " older not shown)" : "")));
    var tb = GE.el("table", { id: "history" });
    tb.appendChild(GE.el("tr", {}, null)).append(GE.el("th", {}, "#"), GE.el("th", {}, "event"), GE.el("th", {}, "by, at"));
    d.events.forEach(function (e) {
      var actor = [e.actor_kind, e.actor_name, e.actor_principal ? "as " + e.actor_principal : ""].filter(Boolean).join(" ");
      if (e.owner) actor += (actor ? " · " : "") + e.owner + " g" + e.generation;
      var tr = GE.el("tr", { "data-kind": e.kind });
      var ev = GE.el("td", {}, null);
      ev.append(GE.el("b", {}, e.kind));
      if (e.detail) ev.append(GE.el("div", { "class": "small", title: e.detail }, GE.clip(readable(e.detail), 120)));
      var by = GE.el("td", {}, null);
      by.append(GE.el("div", {}, actor || "—"), GE.el("div", { "class": "small" }, when(e.at_ms)));
      tr.append(GE.el("td", {}, e.seq), ev, by);
      tb.appendChild(tr);
    });
    detail.appendChild(tb);
  }

  function select(taskID) {
    selected = taskID;
    if (last) render();
    if (detailPoll) detailPoll.stop();
    detailPoll = poller("/ui/api/tasks/" + encodeURIComponent(taskID), showDetail, document.body.getAttribute("data-mode") === "pushed");
  }

  pushed("/ui/api/workflows/" + encodeURIComponent(id), "/ui/workflows/" + encodeURIComponent(id) + "/events", function (d) {
    last = d;
    render();
  }, function () { return detailPoll ? [detailPoll] : []; });
  setInterval(function () { GE.tick(ticking, now(), true); }, 1000);
})();
