// sdk-v1-client.mjs URL — the README's worker loop with the official
// TypeScript SDK v1 (@modelcontextprotocol/sdk, legacy initialize handshake):
// list the tools, create a two-node workflow, claim-next with wait_ms,
// heartbeat, complete, and check that the dependent became claimable and
// that a superseded claim is refused; then the graph data: upstream results,
// release, capability routing, a retry delay, the workflow outline and a
// completion that claims the next task (claim_next). Prints one line per check and
// "sdk-v1-client: N passed, M failed"; exits 1 on any failure.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const url = process.argv[2];
if (!url) {
  console.error("usage: sdk-v1-client.mjs URL");
  process.exit(2);
}
const token = process.env.GRAPH_ENGINEERING_AUTH_TOKEN;
const auth = token ? { Authorization: `Bearer ${token}` } : {};
let passed = 0, failed = 0;
function check(name, ok, detail) {
  if (ok) passed++; else failed++;
  console.log(`${ok ? "PASS" : "FAIL"} ${name}${ok || detail === undefined ? "" : ": " + detail}`);
}

const client = new Client({ name: "ts-sdk-v1-check", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: auth } });
const tool = async (name, args) => {
  const r = await client.callTool({ name, arguments: args });
  if (r.isError) throw new Error(`${name}: ${r.content?.[0]?.text}`);
  return r.structuredContent;
};
try {
  await client.connect(transport);
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  check("tools/list has exactly the seven tools", names.length === 7 && names.every((n) => n.startsWith("graph_task_")), names.join(","));
  const wf = `v1-${Date.now().toString(36)}`;
  await tool("graph_task_create", { workflow_id: wf, node_id: "a" });
  const b = await tool("graph_task_create", { workflow_id: wf, node_id: "b", depends_on: ["a"] });
  check("a dependent starts blocked", b.task.state === "blocked", b.task.state);
  const c = await tool("graph_task_claim", { owner: "ts-v1", workflow_id: wf, wait_ms: 2000, lease_ms: 5000 });
  check("claim-next claims the ready node", c.claimed === true && c.task.node_id === "a", JSON.stringify(c));
  const h = { task_id: c.task.task_id, owner: "ts-v1", generation: c.lease.generation, claim_token: c.lease.claim_token };
  const hb = await tool("graph_task_heartbeat", { ...h, lease_ms: 5000 });
  check("heartbeat keeps the generation", hb.task.generation === c.lease.generation, JSON.stringify(hb.task));
  await tool("graph_task_complete", { ...h, result: { ok: true } });
  const c2 = await tool("graph_task_claim", { owner: "ts-v1", workflow_id: wf, wait_ms: 2000 });
  check("the dependent is claimable after the completion", c2.claimed === true && c2.task.node_id === "b", JSON.stringify(c2));
  const stale = await client.callTool({ name: "graph_task_complete", arguments: { ...h, task_id: c2.task.task_id, result: 1 } });
  check("a claim that is not the live one is refused", stale.isError === true, JSON.stringify(stale.content));
  check("every result carries a receipt", typeof c2.receipt?.manifestSha256 === "string", JSON.stringify(c2.receipt));
  // The graph data, each answer checked by this SDK against the tool's
  // output schema (it keeps the schemas from tools/list).
  const dep = await tool("graph_task_inspect", { workflow_id: wf, node_id: "b" });
  check("inspect by node returns the upstream result", dep.dependencies?.[0]?.node_id === "a" && dep.dependencies[0].result?.ok === true, JSON.stringify(dep.dependencies));
  const h2 = { task_id: c2.task.task_id, owner: "ts-v1", generation: c2.lease.generation, claim_token: c2.lease.claim_token };
  const rel = await tool("graph_task_cancel", { ...h2, release: true });
  check("a release gives the task back as pending", rel.task.state === "pending" && rel.task.attempts === 0, JSON.stringify(rel.task));
  await tool("graph_task_create", { workflow_id: wf, node_id: "g", requires: ["gpu"], priority: 5 });
  const plain = await tool("graph_task_claim", { owner: "ts-v1", workflow_id: wf });
  const gpu = await tool("graph_task_claim", { owner: "ts-gpu", workflow_id: wf, capabilities: ["gpu"] });
  check("a routed task goes only to a claim with its capabilities", plain.task?.node_id === "b" && gpu.task?.node_id === "g", JSON.stringify([plain.task?.node_id, gpu.task?.node_id]));
  const hg = { task_id: gpu.task.task_id, owner: "ts-gpu", generation: gpu.lease.generation, claim_token: gpu.lease.claim_token };
  const failed = await tool("graph_task_fail", { ...hg, error: "no driver", retryable: true, retry_after_ms: 60000 });
  check("a retryable failure waits for its retry_after_ms", failed.task.state === "pending" && typeof failed.task.due_at === "string", JSON.stringify(failed.task));
  const outline = await tool("graph_task_inspect", { workflow_id: wf });
  check("inspect by workflow_id outlines the workflow", outline.workflow?.tasks?.length === 3 && outline.task === undefined, JSON.stringify(outline.workflow?.counts));
  // A worker's loop in one call: complete with claim_next claims the next
  // ready task in the same transaction; the SDK checks the answer against
  // graph_task_complete's outputSchema.
  const wn = `${wf}-next`;
  await tool("graph_task_create", { workflow_id: wn, node_id: "n1" });
  await tool("graph_task_create", { workflow_id: wn, node_id: "n2" });
  const n1 = await tool("graph_task_claim", { owner: "ts-v1", workflow_id: wn });
  const hn = { task_id: n1.task.task_id, owner: "ts-v1", generation: n1.lease.generation, claim_token: n1.lease.claim_token };
  const cn = await tool("graph_task_complete", { ...hn, result: 1, claim_next: { workflow_id: wn, lease_ms: 5000 } });
  check("complete with claim_next completes and claims the next task", cn.task.state === "completed" && cn.claimed_next === true &&
    cn.next?.task?.node_id === "n2" && cn.next.lease?.owner === "ts-v1" && typeof cn.next.receipt?.receiptSha256 === "string", JSON.stringify(cn));
  const hn2 = { task_id: cn.next.task.task_id, owner: "ts-v1", generation: cn.next.lease.generation, claim_token: cn.next.lease.claim_token };
  const last = await tool("graph_task_complete", { ...hn2, result: 2, claim_next: { workflow_id: wn } });
  check("claim_next with nothing ready answers claimed_next false", last.task.state === "completed" && last.claimed_next === false && last.next === null, JSON.stringify(last));
} catch (e) {
  check("the flow ran to the end", false, e?.stack ?? String(e));
} finally {
  await client.close().catch(() => {});
}
console.log(`sdk-v1-client: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
