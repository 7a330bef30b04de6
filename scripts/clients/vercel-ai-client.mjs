// vercel-ai-client.mjs URL ERA — the Vercel AI SDK's MCP client
// (@ai-sdk/mcp) and its agent loop (generateText from ai) against this
// server, in ERA "modern" (2026-07-28: the client's default, server/discover
// and no session) or "legacy" (the initialize handshake, which the client
// uses with protocolVersionDiscovery: false). It lists the seven tools as AI
// SDK tools (client.tools(), whose input schemas are jsonSchema() wrappers of
// the server's), checks that the schema each reaches the model with is the
// server's own, and lets a scripted model (MockLanguageModelV3 from ai/test:
// no network, its tool calls decided from the tool results it is shown) drive
// a task end to end through generateText, each of the seven tools at least
// once: create two dependent tasks, claim the first, heartbeat, complete it
// with a string result, inspect the dependent (the upstream result shows),
// release, claim and fail it with a retry delay, create a whole graph, and a
// second completion that the server refuses and the SDK hands back to the
// model as a tool error. Prints one line per check and
// "vercel-ai-client-ERA: N passed, M failed"; exits 1 on any failure.
// GRAPH_ENGINEERING_AUTH_TOKEN, when set, is sent as the bearer token.
import { createMCPClient } from "@ai-sdk/mcp";
import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { canonical, checker, headers } from "./checks.mjs";

const [url, era] = process.argv.slice(2);
if (!url || (era !== "modern" && era !== "legacy")) {
  console.error("usage: vercel-ai-client.mjs URL modern|legacy");
  process.exit(2);
}
const { check, finish } = checker(`vercel-ai (${era})`);

let client;
try {
  client = await createMCPClient({
    transport: { type: "http", url, headers },
    clientName: "vercel-ai-check",
    protocolVersionDiscovery: era === "modern",
  });
  const want = era === "modern" ? "2026-07-28" : "2025-11-25";
  check(`the client speaks ${want}`, client.initializeResult.protocolVersion === want, client.initializeResult.protocolVersion);

  const { tools: defs } = await client.listTools();
  const tools = await client.tools();
  const names = Object.keys(tools).sort();
  check("client.tools() has exactly the seven tools", names.length === 7 && names.every((n) => n.startsWith("graph_task_")), names.join(","));

  // The model: each step answers the next tool call of the script, decided
  // from the tool results in its prompt; the first step also records the
  // tools as the SDK hands them to a provider.
  const run = `vercel-${era}-${Date.now().toString(36)}`;
  let seenTools;
  const resultOf = (prompt, toolName) => {
    for (let i = prompt.length - 1; i >= 0; i--) {
      const m = prompt[i];
      if (m.role !== "tool") continue;
      for (const part of m.content) {
        if (part.type === "tool-result" && part.toolName === toolName) return part.output;
      }
    }
    return undefined;
  };
  // textOf is the JSON text the server answered with, as the model reads it.
  const textOf = (output) => {
    const v = output?.value;
    const text = Array.isArray(v) ? v.find((p) => p.type === "text")?.text : typeof v === "string" ? v : JSON.stringify(v);
    try { return JSON.parse(text); } catch { return { text }; }
  };
  let lease;
  const holder = (prompt) => {
    const c = textOf(resultOf(prompt, "graph_task_claim"));
    return { task_id: c.task?.task_id, owner: c.lease?.owner, generation: c.lease?.generation, claim_token: c.lease?.claim_token };
  };
  let bid;
  const script = [
    () => ["graph_task_create", { workflow_id: run, node_id: "a", payload: { n: 1 } }],
    () => ["graph_task_create", { workflow_id: run, node_id: "b", depends_on: ["a"] }],
    () => ["graph_task_claim", { owner: "vercel-worker", workflow_id: run, wait_ms: 2000, lease_ms: 30000 }],
    (prompt) => {
      lease = holder(prompt);
      return ["graph_task_heartbeat", { ...lease, progress: { done: 1, total: 2 }, status_message: "halfway" }];
    },
    () => ["graph_task_complete", { ...lease, result: "the answer is 42" }],
    () => ["graph_task_inspect", { workflow_id: run, node_id: "b" }],
    (prompt) => {
      bid = textOf(resultOf(prompt, "graph_task_inspect")).task?.task_id;
      return ["graph_task_claim", { owner: "vercel-worker", task_id: bid }];
    },
    (prompt) => ["graph_task_cancel", { ...holder(prompt), release: true }],
    () => ["graph_task_claim", { owner: "vercel-worker", task_id: bid }],
    (prompt) => ["graph_task_fail", { ...holder(prompt), error: "no driver", retryable: true, retry_after_ms: 60000 }],
    () => ["graph_task_create", { workflow_id: `${run}-graph`, nodes: [{ node_id: "x" }, { node_id: "y", depends_on: ["x"] }] }],
    () => ["graph_task_complete", { ...lease, result: "a second completion" }],
  ];
  let step = 0;
  const model = new MockLanguageModelV3({
    doGenerate: async (options) => {
      seenTools ??= options.tools;
      const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };
      if (step === script.length) {
        return { content: [{ type: "text", text: "done" }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] };
      }
      const [toolName, input] = script[step++](options.prompt);
      return {
        content: [{ type: "tool-call", toolCallId: `call-${step}`, toolName, input: JSON.stringify(input) }],
        finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage, warnings: [],
      };
    },
  });

  const out = await generateText({ model, tools, prompt: "work the task graph", stopWhen: stepCountIs(script.length + 2) });

  // Each schema as the SDK hands it to a provider: the server's, unchanged.
  const given = new Map((seenTools ?? []).map((t) => [t.name, t.inputSchema]));
  const changed = defs.filter((d) => canonical(given.get(d.name)) !== canonical(d.inputSchema)).map((d) => d.name);
  check("the model is given each of the seven input schemas as the server sent it", given.size === 7 && changed.length === 0,
    `${given.size} tools; changed: ${changed.join(",")}`);

  const calls = out.steps.flatMap((s) => s.toolResults.map((r) => ({ name: r.toolName, out: r.output })));
  const errors = out.steps.flatMap((s) => s.content.filter((p) => p.type === "tool-error"));
  check("the agent loop ran every scripted tool call and stopped", calls.length + errors.length === script.length && out.text === "done",
    `${calls.length} results, ${errors.length} errors, text ${JSON.stringify(out.text)}`);
  const sc = (i) => calls[i]?.out?.structuredContent;
  check("create answers a pending task, then a blocked dependent", sc(0)?.task?.state === "pending" && sc(1)?.task?.state === "blocked",
    JSON.stringify([sc(0)?.task?.state, sc(1)?.task?.state]));
  check("claim claims the ready task", sc(2)?.claimed === true && sc(2)?.task?.node_id === "a", JSON.stringify(sc(2)));
  check("heartbeat with a report keeps the claim", sc(3)?.task?.state === "claimed" && sc(3)?.task?.report?.progress?.done === 1,
    JSON.stringify(sc(3)?.task));
  check("complete with a string result completes it", sc(4)?.task?.state === "completed" && sc(4)?.task?.result === "the answer is 42",
    JSON.stringify(sc(4)?.task));
  const dep = sc(5);
  check("inspect shows the dependent ready with the upstream result", dep?.task?.state === "pending" &&
    dep?.dependencies?.[0]?.node_id === "a" && dep.dependencies[0].result === "the answer is 42", JSON.stringify(dep));
  check("cancel with release gives the claim back", sc(6)?.task?.node_id === "b" && sc(7)?.task?.state === "pending" &&
    sc(7)?.task?.attempts === 0, JSON.stringify(sc(7)?.task));
  check("fail with retryable and retry_after_ms leaves it pending until its due time", sc(9)?.task?.state === "pending" &&
    typeof sc(9)?.task?.due_at === "string", JSON.stringify(sc(9)?.task));
  check("create with nodes creates a whole graph", sc(10)?.created === true && sc(10)?.nodes?.length === 2, JSON.stringify(sc(10)));
  const stale = calls[11]?.out;
  check("a second completion is refused and reaches the model as a tool error", stale?.isError === true &&
    typeof stale.content?.[0]?.text === "string", JSON.stringify(stale ?? errors));
} catch (e) {
  check("the flow ran to the end", false, e?.stack ?? String(e));
} finally {
  await client?.close().catch(() => {});
}
finish(`vercel-ai-client-${era}`);
