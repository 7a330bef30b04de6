// complete-one.mjs URL WORKFLOW — a worker for another client's task: claim
// the next task of WORKFLOW (waiting for one to be created, up to 30 s per
// claim, for at most a minute), complete it with the result {"answer": 42},
// and exit 0; exit 1 if no task came. It uses the official TypeScript SDK v2
// (@modelcontextprotocol/client, 2026-07-28). GRAPH_ENGINEERING_AUTH_TOKEN,
// when set, is sent as the bearer token.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const [url, workflow] = process.argv.slice(2);
if (!url || !workflow) {
  console.error("usage: complete-one.mjs URL WORKFLOW");
  process.exit(2);
}
const token = process.env.GRAPH_ENGINEERING_AUTH_TOKEN;
const auth = token ? { Authorization: `Bearer ${token}` } : {};
const client = new Client({ name: "ts-complete-one", version: "1.0.0" }, { capabilities: {}, versionNegotiation: { mode: "auto" } });
await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: auth } }));
const tool = async (name, args) => {
  const r = await client.callTool({ name, arguments: args });
  if (r.isError) throw new Error(`${name}: ${r.content?.[0]?.text}`);
  return r.structuredContent;
};
let code = 1;
try {
  for (let i = 0; i < 2 && code !== 0; i++) {
    const c = await tool("graph_task_claim", { owner: "ts-complete-one", workflow_id: workflow, wait_ms: 30000 });
    if (!c.claimed) continue;
    await tool("graph_task_complete", { task_id: c.task.task_id, owner: c.lease.owner, generation: c.lease.generation, claim_token: c.lease.claim_token, result: { answer: 42 } });
    console.error(`complete-one: completed ${c.task.task_id}`);
    code = 0;
  }
  if (code !== 0) console.error(`complete-one: no task of ${workflow} came`);
} catch (e) {
  console.error(`complete-one: ${e?.stack ?? e}`);
} finally {
  await client.close().catch(() => {});
}
process.exit(code);
