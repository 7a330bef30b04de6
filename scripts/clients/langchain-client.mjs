// langchain-client.mjs URL — LangChain's MCP adapters
// (@langchain/mcp-adapters: MultiServerMCPClient) with LangGraph's ToolNode
// against this server, in the legacy era only: the adapters connect through
// the official TypeScript SDK v1 (@modelcontextprotocol/sdk), which speaks
// the initialize handshake and knows no protocol version after 2025-11-25,
// so LangChain cannot speak 2026-07-28 (the TypeScript SDK v2 and the Vercel
// AI SDK check that era). It loads the seven tools as LangChain tools, checks
// that the input schema each gives a model (convertToOpenAITool, what
// bindTools sends) is the server's own — the adapters simplify each schema
// (anyOf/oneOf/allOf merged, $ref inlined) and validate a call's arguments
// against what is left before sending it — and drives a task end to end as
// an agent's tool calls through ToolNode, each of the seven tools at least
// once: create two dependent tasks, claim the first, heartbeat with a
// report, complete it with a string result, inspect the dependent (the
// upstream result shows), release, claim and fail it with a retry delay,
// create a whole graph in one call, and a second completion with a result of each
// JSON type, which the adapters pass and the server refuses (ToolNode hands
// each refusal back as an error ToolMessage). Prints one line per check
// and "langchain-client: N passed, M failed"; exits 1 on any failure.
// GRAPH_ENGINEERING_AUTH_TOKEN, when set, is sent as the bearer token.
import { MultiServerMCPClient } from "@langchain/mcp-adapters";
import { ToolNode } from "@langchain/langgraph/prebuilt";
import { AIMessage } from "@langchain/core/messages";
import { convertToOpenAITool } from "@langchain/core/utils/function_calling";
import { canonical, checker, headers } from "./checks.mjs";

const url = process.argv[2];
if (!url) {
  console.error("usage: langchain-client.mjs URL");
  process.exit(2);
}
const { check, finish } = checker(`langchain (legacy)`);
// diff names the paths where two schemas differ.
function diff(a, b, path = "", out = []) {
  if (canonical(a) === canonical(b)) return out;
  if (a && b && typeof a === "object" && typeof b === "object" && !Array.isArray(a) && !Array.isArray(b)) {
    for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) diff(a[k], b[k], `${path}/${k}`, out);
  } else out.push(path || "/");
  return out;
}

const client = new MultiServerMCPClient({
  mcpServers: { graph: { transport: "http", url, headers, automaticSSEFallback: false } },
  throwOnLoadError: true,
});
try {
  const tools = await client.getTools();
  const names = tools.map((t) => t.name).sort();
  check("getTools() loads exactly the seven tools", names.length === 7 && names.every((n) => n.startsWith("graph_task_")), names.join(","));

  // The server's schemas, as tools/list sent them, from the SDK client the
  // adapters connected with; then each as a model would be given it.
  const sdk = await client.getClient("graph");
  check("the adapters' SDK client negotiated 2025-11-25", sdk?.transport?.protocolVersion === "2025-11-25", String(sdk?.transport?.protocolVersion));
  const { tools: defs } = await sdk.listTools();
  // The adapters drop every anyOf; the server's only input anyOf is
  // result's "any JSON value", which stays any JSON value without it.
  const dropped = "graph_task_complete /properties/result/anyOf";
  const changed = [];
  for (const d of defs) {
    const t = tools.find((x) => x.name === d.name);
    const given = t && convertToOpenAITool(t).function.parameters;
    const paths = diff(d.inputSchema, given);
    if (paths.length) changed.push(`${d.name} ${paths.join(" ")}`);
  }
  check("a model is given each of the seven input schemas as the server sent it, but for result's anyOf (any JSON value either way)",
    defs.length === 7 && changed.every((c) => c === dropped), changed.join("; "));

  // An agent's tool calls, run by LangGraph's ToolNode: each answer is the
  // ToolMessage a model would read next.
  const node = new ToolNode(tools);
  let n = 0;
  const call = async (name, args) => {
    const id = `call-${++n}`;
    const { messages } = await node.invoke({ messages: [new AIMessage({ content: "", tool_calls: [{ name, args, id, type: "tool_call" }] })] });
    const m = messages[0];
    // The adapters answer one text block (with the structured result beside
    // it), which ToolNode serializes whole into the message's content.
    let text = typeof m.content === "string" ? m.content : m.content.map((p) => p.text ?? "").join("");
    let value;
    try { value = JSON.parse(text); } catch { value = undefined; }
    if (value?.type === "text" && typeof value.text === "string") {
      text = value.text;
      try { value = JSON.parse(text); } catch { value = undefined; }
    }
    return { status: m.status, text, value, id: m.tool_call_id === id };
  };
  const run = `langchain-${Date.now().toString(36)}`;
  const a = await call("graph_task_create", { workflow_id: run, node_id: "a", payload: { n: 1 } });
  const b = await call("graph_task_create", { workflow_id: run, node_id: "b", depends_on: ["a"] });
  check("create answers a pending task, then a blocked dependent", a.value?.task?.state === "pending" && b.value?.task?.state === "blocked" && a.id,
    JSON.stringify([a.status, a.text.slice(0, 300), b.text.slice(0, 300)]));
  const c = await call("graph_task_claim", { owner: "langchain-worker", workflow_id: run, wait_ms: 2000, lease_ms: 30000 });
  check("claim claims the ready task", c.value?.claimed === true && c.value?.task?.node_id === "a", c.text.slice(0, 500));
  const lease = { task_id: c.value?.task?.task_id, owner: c.value?.lease?.owner, generation: c.value?.lease?.generation, claim_token: c.value?.lease?.claim_token };
  const hb = await call("graph_task_heartbeat", { ...lease, lease_ms: 30000, progress: { done: 1, total: 2 }, status_message: "halfway",
    usage: { input_tokens: 10, output_tokens: 5, cost_usd: 0.01 } });
  check("heartbeat with a progress, status and usage report keeps the claim", hb.value?.task?.state === "claimed" &&
    hb.value.task.report?.progress?.done === 1 && hb.value.task.report?.usage?.output_tokens === 5, hb.text.slice(0, 500));
  const done = await call("graph_task_complete", { ...lease, result: "the answer is 42" });
  check("complete with a string result completes it", done.status !== "error" && done.value?.task?.state === "completed" &&
    done.value.task.result === "the answer is 42", done.text.slice(0, 500));
  const dep = await call("graph_task_inspect", { workflow_id: run, node_id: "b" });
  check("inspect shows the dependent ready with the upstream result", dep.value?.task?.state === "pending" &&
    dep.value?.dependencies?.[0]?.node_id === "a" && dep.value.dependencies[0].result === "the answer is 42", dep.text.slice(0, 500));
  // The dependent: released, claimed again and failed with a retry delay.
  const bid = dep.value?.task?.task_id;
  const holder = (c) => ({ task_id: bid, owner: c.value?.lease?.owner, generation: c.value?.lease?.generation, claim_token: c.value?.lease?.claim_token });
  const cb = await call("graph_task_claim", { owner: "langchain-worker", task_id: bid, lease_ms: 30000 });
  const rel = await call("graph_task_cancel", { ...holder(cb), release: true });
  check("cancel with release gives the claim back", rel.value?.task?.state === "pending" && rel.value.task.attempts === 0, rel.text.slice(0, 500));
  const cb2 = await call("graph_task_claim", { owner: "langchain-worker", task_id: bid });
  const fl = await call("graph_task_fail", { ...holder(cb2), error: "no driver", retryable: true, retry_after_ms: 60000 });
  check("fail with retryable and retry_after_ms leaves it pending until its due time", fl.value?.task?.state === "pending" &&
    typeof fl.value.task.due_at === "string", fl.text.slice(0, 500));
  // A whole graph in one create, with a timestamp (format date-time), tags and a priority.
  const g = await call("graph_task_create", { workflow_id: `${run}-graph`, nodes: [
    { node_id: "x", payload: { k: "v" }, not_before: new Date(Date.now() + 3600e3).toISOString() },
    { node_id: "y", depends_on: ["x"], requires: ["gpu"], priority: 5 }] });
  check("create with nodes creates a whole graph", g.value?.created === true && g.value?.nodes?.length === 2, g.text.slice(0, 500));

  // A second completion: LangChain lets every JSON type of result through
  // its own validation, and the server refuses each (the claim is spent).
  const refusals = [];
  for (const result of ["a second completion", 7, true, null, [1, "x"], { v: 1 }]) {
    const r = await call("graph_task_complete", { ...lease, result });
    if (r.status !== "error" || !r.text.includes("returned an error") || r.text.includes("did not match expected schema")) refusals.push(`${JSON.stringify(result)}: ${r.text.slice(0, 200)}`);
  }
  check("a second completion, with a result of each JSON type, reaches the server and comes back refused as an error ToolMessage",
    refusals.length === 0, refusals.join("; "));
} catch (e) {
  check("the flow ran to the end", false, e?.stack ?? String(e));
} finally {
  await client.close().catch(() => {});
}
finish(`langchain-client`);
