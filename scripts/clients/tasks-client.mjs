// tasks-client.mjs URL — drive the Tasks extension flow of this server with
// the official TypeScript clients: @modelcontextprotocol/client (SDK v2,
// protocol 2026-07-28) and @modelcontextprotocol/ext-tasks. It creates three
// tasks through the Tasks session (each returns a task handle), works them
// with the plain worker tools (claim, complete / fail), cancels the third
// through the extension, and checks how each settles, then completes a task
// with claim_next (the next task claimed in the same call): a completed one with
// graph_task_create's own result (task, created, receipt), as its
// outputSchema declares. Prints one line per
// check and "tasks-client: N passed, M failed"; exits 1 on any failure.
// GRAPH_ENGINEERING_AUTH_TOKEN, when set, is sent as the bearer token.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createTaskSessionFromClient, resultFromTaskOutcome } from "@modelcontextprotocol/ext-tasks/client";

const url = process.argv[2];
if (!url) {
  console.error("usage: tasks-client.mjs URL");
  process.exit(2);
}
const token = process.env.GRAPH_ENGINEERING_AUTH_TOKEN;
const auth = token ? { Authorization: `Bearer ${token}` } : {};
const clientInfo = { name: "ts-tasks-check", version: "1.0.0" };
const clientCapabilities = { extensions: { "io.modelcontextprotocol/tasks": {} } };

let passed = 0, failed = 0;
function check(name, ok, detail) {
  if (ok) passed++; else failed++;
  console.log(`${ok ? "PASS" : "FAIL"} ${name}${ok || detail === undefined ? "" : ": " + detail}`);
}

// rawDispatch posts one JSON-RPC request as the 2026-07-28 Streamable HTTP
// transport requires (MCP.md §9): the protocol and method headers, and
// Mcp-Name for the methods that name a target.
// The package hands over the method and params; the host frames the message.
let nextId = 1;
async function rawDispatch(request, options) {
  request = { jsonrpc: "2.0", id: `raw-${nextId++}`, ...request };
  const p = request.params ?? {};
  const headers = {
    "Content-Type": "application/json",
    Accept: "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": request.method,
    ...auth,
  };
  const name = p.name ?? p.uri ?? p.taskId;
  if (typeof name === "string") headers["Mcp-Name"] = name;
  const res = await fetch(url, { method: "POST", headers, body: JSON.stringify(request), signal: options?.signal });
  const out = await res.json();
  if (process.env.DEBUG) console.error(">>", JSON.stringify(request), "\n<<", res.status, JSON.stringify(out));
  return out;
}

const client = new Client(clientInfo, { capabilities: {}, versionNegotiation: { mode: "auto" } });
await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: auth } }));
check("the SDK v2 client negotiates 2026-07-28", client.getProtocolEra() === "modern", `era ${client.getProtocolEra()}`);

const session = createTaskSessionFromClient(client, {
  endpointId: "graph-engineering-check",
  rawDispatch,
  v2RequestFraming: { protocolVersion: "2026-07-28", clientInfo, clientCapabilities },
});

const run = Date.now().toString(36);
const tool = async (name, args) => {
  const r = await client.callTool({ name, arguments: args });
  if (r.isError) throw new Error(`${name}: ${r.content?.[0]?.text}`);
  return r.structuredContent;
};
const claimAs = async (taskId) => {
  const c = await tool("graph_task_claim", { owner: "ts-worker", task_id: taskId, lease_ms: 30000 });
  return { task_id: taskId, owner: "ts-worker", generation: c.lease.generation, claim_token: c.lease.claim_token };
};

try {
  // 1. Completed by a worker: settles with graph_task_create's own result
  // (what its outputSchema declares: task, created, receipt), the worker's
  // result in task.result.
  const done = await session.callTool("graph_task_create", { workflow_id: `ts-${run}`, node_id: "done", payload: { n: 1 } });
  check("create returns a task handle", done.kind === "task", `kind ${done.kind}`);
  const h1 = await claimAs(done.handle.taskId);
  await tool("graph_task_complete", { ...h1, result: { answer: 42 } });
  const s1 = await done.settle();
  check("a completed task settles completed", s1.outcome.status === "completed", JSON.stringify(s1.outcome));
  if (s1.outcome.status === "completed") {
    const r = resultFromTaskOutcome(s1.outcome);
    const sc = r?.structuredContent;
    check("its result is create's result with the worker's result in task.result",
      sc?.task?.result?.answer === 42 && sc?.task?.state === "completed" && sc?.created === true && typeof sc?.receipt?.receiptSha256 === "string" &&
        Object.keys(sc).length === 3 && r.isError === false, JSON.stringify(r));
  }

  // 2. Failed by a worker: a tool-level failure, completed with isError.
  const bad = await session.callTool("graph_task_create", { workflow_id: `ts-${run}`, node_id: "bad", max_attempts: 1 });
  const h2 = await claimAs(bad.handle.taskId);
  await tool("graph_task_fail", { ...h2, error: "the input was wrong", retryable: false });
  const s2 = await bad.settle();
  check("a failed task settles completed", s2.outcome.status === "completed", JSON.stringify(s2.outcome));
  if (s2.outcome.status === "completed") {
    const r = resultFromTaskOutcome(s2.outcome);
    check("its result has isError and the worker's error", r?.isError === true && r.content?.[0]?.text === "the input was wrong", JSON.stringify(r));
  }

  // 3. Cancelled through the extension while a worker holds it: the worker is fenced out.
  const gone = await session.callTool("graph_task_create", { workflow_id: `ts-${run}`, node_id: "gone" });
  const h3 = await claimAs(gone.handle.taskId);
  await gone.cancel();
  const s3 = await gone.settle().catch((e) => ({ error: e }));
  const status3 = s3.outcome?.status ?? (s3.error ? `error ${s3.error}` : "none");
  check("a cancelled task settles cancelled", status3 === "cancelled", status3);
  const late = await client.callTool({ name: "graph_task_complete", arguments: { ...h3, result: 1 } });
  check("the cancelled task's worker is fenced out", late.isError === true, JSON.stringify(late.content));

  // 4. A worker's loop in one call in this era: complete with claim_next
  // claims the next ready task (the SDK validates the answer against
  // graph_task_complete's outputSchema).
  const wn = `ts-${run}-next`;
  await tool("graph_task_create", { workflow_id: wn, node_id: "n1" });
  await tool("graph_task_create", { workflow_id: wn, node_id: "n2" });
  const c1 = await tool("graph_task_claim", { owner: "ts-worker", workflow_id: wn });
  const hn = { task_id: c1.task.task_id, owner: "ts-worker", generation: c1.lease.generation, claim_token: c1.lease.claim_token };
  const cn = await tool("graph_task_complete", { ...hn, result: 1, claim_next: { workflow_id: wn } });
  check("complete with claim_next claims the next task", cn.task.state === "completed" && cn.claimed_next === true &&
    cn.next?.task?.node_id === "n2" && cn.next.lease?.owner === "ts-worker", JSON.stringify(cn));
} catch (e) {
  check("the flow ran to the end", false, (e?.stack ?? String(e)) + " " + JSON.stringify(e, Object.getOwnPropertyNames(e ?? {})).slice(0, 3000));
} finally {
  await session.close().catch(() => {});
  await client.close().catch(() => {});
}
console.log(`tasks-client: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
