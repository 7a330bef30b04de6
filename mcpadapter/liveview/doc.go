// Package liveview is the operator view of the task graph that the HTTP
// front serves under /ui/: a list of workflows, each workflow drawn as its
// DAG with states, holders and lease countdowns, and a task's detail and
// history; with the login by which a browser, which cannot send a bearer
// header, gets in; and, for a principal with the approve role, approve and
// reject on the approval gates awaiting a decision. Its page, style sheet
// and scripts are embedded (ui/), and the same drawing is the MCP App's
// document (AppHTML), which never decides a gate.
//
// # Invariants
//
//   - Reads only: GET and HEAD only, but the login routes and gate
//     decisions, and reads only through the taskgraph Store API; its reads
//     never expire a lapsed lease (a stuck claim stays visible as stuck
//     until the sweeper expires it).
//   - Its one write is a gate decision (gate.go), through Store.DecideGate
//     as the HTTP front's POST /gates/… and admin approve|reject, recorded
//     with actor approver and the principal. It is a POST that needs a view
//     session (never a bearer token; never without authentication), an
//     Origin header (which the front has checked), the session's own
//     anti-forgery token in X-CSRF-Token (compared in constant time; held
//     in the session's entry, readable only by a same-origin script from
//     /ui/api/me), and the approve role, checked against the live principal
//     table at the request; a gate outside the principal's workflows
//     answers as a missing one.
//   - Never shows a claim token or its digest (taskgraph.Task holds
//     neither), sends a strict Content-Security-Policy, and loads nothing
//     from outside the binary.
//   - Its reads take their own few slots (UIMaxConcurrent), never one of
//     the MCP concurrency slots: the view cannot slow a worker's call down by
//     more than its own reads.
//   - Behind the same authentication as /mcp: a bearer token, or a session
//     cookie (HttpOnly, SameSite=Strict, Path=/ui) got for a one-time login
//     code that only a token can mint; only digests of codes and sessions
//     are kept, and POST /ui/logout forgets one. The principal is resolved
//     at each request and needs the observe role; its workflow scope filters
//     what is shown, and a workflow outside it answers as a missing one.
//   - A login link redirects only to a path under /ui/.
//   - The workflow page is pushed (push.go): its event stream says when
//     the workflow's version (one row, and its pause) moved, never
//     rebuilding an answer to find out; one hub reads the watched versions
//     on the store's commit signal and at least every second, hands each
//     stream only the latest version (never waiting for one), bounds the
//     streams (UIMaxStreams, then 503), and ends them all on Config.Stop.
package liveview
