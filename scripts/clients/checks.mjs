// checks.mjs — what the agent-framework client scripts (vercel-ai-client.mjs,
// langchain-client.mjs) share: the bearer header from the environment, one
// PASS/FAIL line per check with the counts at the end, and key-sorted JSON
// for comparing schemas.

// GRAPH_ENGINEERING_AUTH_TOKEN, when set, is sent as the bearer token.
const token = process.env.GRAPH_ENGINEERING_AUTH_TOKEN;
export const headers = token ? { Authorization: `Bearer ${token}` } : {};

// checker returns check(name, ok, detail), which prints a PASS or FAIL line
// labelled label (detail only on a failure), and finish(script), which prints
// the counts and exits 0 when nothing failed, 1 otherwise.
export function checker(label) {
  let passed = 0, failed = 0;
  return {
    check(name, ok, detail) {
      if (ok) passed++; else failed++;
      console.log(`${ok ? "PASS" : "FAIL"} ${label}: ${name}${ok || detail === undefined ? "" : ": " + detail}`);
    },
    finish(script) {
      console.log(`${script}: ${passed} passed, ${failed} failed`);
      process.exit(failed === 0 ? 0 : 1);
    },
  };
}

// canonical is JSON with sorted keys, for comparing schemas.
export const canonical = (v) => JSON.stringify(v, (_, x) => (x && typeof x === "object" && !Array.isArray(x) ?
  Object.fromEntries(Object.keys(x).sort().map((k) => [k, x[k]])) : x));
