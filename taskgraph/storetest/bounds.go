package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	tg "github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// boundsTests: every input bound, rejected with nothing written or accepted at its edge.
var boundsTests = []test{
	{"BadInputRejected", testBadInputRejected},
	{"MalformedTaskIDNotFound", testMalformedTaskIDNotFound},
	{"BoundsAccepted", testBoundsAccepted},
	{"TasksPerWorkflowBound", testTasksPerWorkflowBound},
}

// objectOfSize returns a compact JSON object of exactly n bytes.
func objectOfSize(n int) json.RawMessage {
	const frame = len(`{"p":""}`)
	return json.RawMessage(`{"p":"` + strings.Repeat("x", n-frame) + `"}`)
}

// nestedObject returns a JSON object nested depth levels deep ({} is depth 1).
func nestedObject(depth int) json.RawMessage {
	return json.RawMessage(strings.Repeat(`{"a":`, depth-1) + `{}` + strings.Repeat(`}`, depth-1))
}

func nestedArray(depth int) json.RawMessage {
	return json.RawMessage(strings.Repeat(`[`, depth) + strings.Repeat(`]`, depth))
}

// validationFixture is a store holding a workflow "wf" with a completed node,
// a pending node and a node claimed by "worker" (live is its claim).
type validationFixture struct {
	*env
	live    tg.Claimed
	pending tg.Task
}

type badInput struct {
	name  string
	field string
	rule  string // a phrase of the rule the message must state
	call  func(f validationFixture) error
}

func newValidationFixture(t *testing.T, h Harness) validationFixture {
	t.Helper()
	e := setup(t, h)
	done := e.Create(t, "wf", "done")
	c := e.Claim(t, "worker", done.TaskID, 0)
	if _, err := e.S.Complete(e.Ctx, holder(c), json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	held := e.Create(t, "wf", "held")
	pending := e.Create(t, "wf", "pending")
	return validationFixture{env: e, live: e.Claim(t, "worker", held.TaskID, 0), pending: pending}
}

// Every bound, one case each: rejected with ErrInvalid and a *ValidationError
// naming the field, a message stating the field and the rule, and nothing
// written.
func testBadInputRejected(t *testing.T, h Harness) {
	f := newValidationFixture(t, h)
	ctx := f.Ctx
	createIn := func(wf string, spec tg.NodeSpec) func(validationFixture) error {
		return func(f validationFixture) error { _, err := f.S.CreateTask(ctx, wf, spec); return err }
	}
	create := func(spec tg.NodeSpec) func(validationFixture) error { return createIn("wf", spec) }
	claimNext := func(req tg.ClaimRequest) func(validationFixture) error {
		return func(f validationFixture) error { _, _, err := f.S.Claim(ctx, req); return err }
	}
	withHolder := func(mod func(*lease.Holder)) lease.Holder {
		h := holder(f.live)
		mod(&h)
		return h
	}
	heartbeat := func(h lease.Holder, d time.Duration) func(validationFixture) error {
		return func(f validationFixture) error { _, err := f.S.Heartbeat(ctx, h, d); return err }
	}
	complete := func(result string) func(validationFixture) error {
		return func(f validationFixture) error {
			_, err := f.S.Complete(ctx, holder(f.live), json.RawMessage(result))
			return err
		}
	}
	fail := func(text string) func(validationFixture) error {
		return func(f validationFixture) error { _, err := f.S.Fail(ctx, holder(f.live), text, true); return err }
	}
	long := strings.Repeat("a", tg.MaxIdentifierLen+1)
	var cases []badInput
	// Identifiers: workflow_id, node_id, owner (on a claim and on a holder
	// write) and the node ids of depends_on share one rule.
	idCases := []struct{ name, value, rule string }{
		{"empty", "", "is required"},
		{"129 chars", long, "at most 128 characters (got 129)"},
		{"leading dash", "-abc", "must match " + tg.IdentifierPattern},
		{"leading dot", ".abc", "must match"},
		{"space", "a b", "must match"},
		{"unicode", "tâche", "must match"},
		{"slash", "a/b", "must match"},
		{"newline after", "abc\n", "must match"},
	}
	for _, ic := range idCases {
		v := ic.value
		cases = append(cases,
			badInput{"workflow_id " + ic.name, "workflow_id", ic.rule, createIn(v, tg.NodeSpec{NodeID: "x"})},
			badInput{"node_id " + ic.name, "node_id", ic.rule, create(tg.NodeSpec{NodeID: v})},
			badInput{"owner on claim " + ic.name, "owner", ic.rule, claimNext(tg.ClaimRequest{Owner: v})},
			badInput{"owner on heartbeat " + ic.name, "owner", ic.rule, heartbeat(withHolder(func(h *lease.Holder) { h.Owner = v }), 0)},
		)
		if v != "" {
			cases = append(cases, badInput{"depends_on " + ic.name, "depends_on", ic.rule, create(tg.NodeSpec{NodeID: "x", DependsOn: []string{v}})})
		}
	}
	tooManyDeps := make([]string, tg.MaxDependsOn+1)
	for i := range tooManyDeps {
		tooManyDeps[i] = fmt.Sprintf("d%d", i)
	}
	cases = append(cases, []badInput{
		// payload: a JSON object of at most 64 KiB, compact.
		{"payload array", "payload", "must be a JSON object", create(tg.NodeSpec{NodeID: "x", Payload: json.RawMessage(`[1]`)})},
		{"payload string", "payload", "must be a JSON object", create(tg.NodeSpec{NodeID: "x", Payload: json.RawMessage(`"s"`)})},
		{"payload number", "payload", "must be a JSON object", create(tg.NodeSpec{NodeID: "x", Payload: json.RawMessage(`12`)})},
		{"payload invalid JSON", "payload", "is not valid JSON", create(tg.NodeSpec{NodeID: "x", Payload: json.RawMessage(`{"a":`)})},
		{"payload trailing comma", "payload", "is not valid JSON", create(tg.NodeSpec{NodeID: "x", Payload: json.RawMessage(`{"a":1,}`)})},
		{"payload two values", "payload", "single JSON value", create(tg.NodeSpec{NodeID: "x", Payload: json.RawMessage(`{} {}`)})},
		{"payload invalid UTF-8", "payload", "UTF-8", create(tg.NodeSpec{NodeID: "x", Payload: json.RawMessage("{\"a\":\"\xff\"}")})},
		{"payload 64 KiB + 1", "payload", "at most 65536 bytes of JSON (got 65537)", create(tg.NodeSpec{NodeID: "x", Payload: objectOfSize(tg.MaxPayloadBytes + 1)})},
		{"payload far too big", "payload", "at most 65536 bytes", create(tg.NodeSpec{NodeID: "x", Payload: objectOfSize(5 * tg.MaxPayloadBytes)})},
		{"payload duplicate keys", "payload", `has the key "a" twice`, create(tg.NodeSpec{NodeID: "x", Payload: json.RawMessage(`{"a":1,"a":2}`)})},
		{"payload nested duplicate keys", "payload", `has the key "k" twice`, create(tg.NodeSpec{NodeID: "x", Payload: json.RawMessage(`{"a":[{"k":1,"k":1}]}`)})},
		{"payload duplicate escaped keys", "payload", `has the key "a" twice`, create(tg.NodeSpec{NodeID: "x", Payload: json.RawMessage(`{"a":1,"\u0061":2}`)})},
		{"payload nested 65 deep", "payload", "nests deeper than 64 levels", create(tg.NodeSpec{NodeID: "x", Payload: nestedObject(tg.MaxJSONDepth + 1)})},
		// numbers beyond float64 range: most JSON decoders cannot read them
		{"payload 1e400", "payload", "holds the number 1e400, beyond the range of a 64-bit float", create(tg.NodeSpec{NodeID: "x", Payload: json.RawMessage(`{"a":[1,1e400]}`)})},
		{"payload -1.8e308", "payload", "holds the number -1.8e308", create(tg.NodeSpec{NodeID: "x", Payload: json.RawMessage(`{"a":-1.8e308}`)})},
		// depends_on
		{"depends_on 65 nodes", "depends_on", "at most 64 nodes (got 65)", create(tg.NodeSpec{NodeID: "x", DependsOn: tooManyDeps})},
		{"depends_on itself", "depends_on", "cannot depend on itself", create(tg.NodeSpec{NodeID: "x", DependsOn: []string{"x"}})},
		{"depends_on twice", "depends_on", `lists "done" twice`, create(tg.NodeSpec{NodeID: "x", DependsOn: []string{"done", "done"}})},
		{"depends_on unknown node", "depends_on", "which is not a node of workflow", create(tg.NodeSpec{NodeID: "x", DependsOn: []string{"nope"}})},
		// max_attempts: 1..100, 0 = default
		{"max_attempts 101", "max_attempts", "between 1 and 100 (got 101)", create(tg.NodeSpec{NodeID: "x", MaxAttempts: 101})},
		{"max_attempts -1", "max_attempts", "between 1 and 100 (got -1)", create(tg.NodeSpec{NodeID: "x", MaxAttempts: -1})},
		// nodes of one creation
		{"no nodes", "nodes", "at least one node", func(f validationFixture) error { _, err := f.S.CreateWorkflow(ctx, "wf", nil); return err }},
		{"10,001 nodes in one call", "nodes", "at most 10000 tasks (got 10001)", func(f validationFixture) error {
			_, err := f.S.CreateWorkflow(ctx, "big", make([]tg.NodeSpec, tg.MaxTasksPerWorkflow+1))
			return err
		}},
		// lease: 1 s .. 15 min, 0 = default
		{"claim lease 999 ms", "lease_ms", "between 1000 and 900000 (got 999)", claimNext(tg.ClaimRequest{Owner: "w", Lease: 999 * time.Millisecond})},
		{"claim lease 15 min + 1 ms", "lease_ms", "between 1000 and 900000 (got 900001)", claimNext(tg.ClaimRequest{Owner: "w", Lease: lease.MaxDuration + time.Millisecond})},
		{"claim lease negative", "lease_ms", "between 1000 and 900000 (got -1000)", claimNext(tg.ClaimRequest{Owner: "w", Lease: -time.Second})},
		{"heartbeat lease 999 ms", "lease_ms", "(got 999)", heartbeat(holder(f.live), 999*time.Millisecond)},
		{"heartbeat lease 15 min + 1 ms", "lease_ms", "(got 900001)", heartbeat(holder(f.live), lease.MaxDuration+time.Millisecond)},
		{"heartbeat lease negative", "lease_ms", "(got -1)", heartbeat(holder(f.live), -time.Millisecond)},
		// wait: 0 .. 30 s, claim-next only
		{"wait 30 s + 1 ms", "wait_ms", "between 0 and 30000 (got 30001)", claimNext(tg.ClaimRequest{Owner: "w", Wait: tg.MaxClaimWait + time.Millisecond})},
		{"wait negative", "wait_ms", "between 0 and 30000 (got -1)", claimNext(tg.ClaimRequest{Owner: "w", Wait: -time.Millisecond})},
		{"wait on a claim by id", "wait_ms", "applies only to claim-next", claimNext(tg.ClaimRequest{Owner: "w", TaskID: f.pending.TaskID, Wait: time.Second})},
		{"task_id and workflow_id", "workflow_id", "not both", claimNext(tg.ClaimRequest{Owner: "w", TaskID: f.pending.TaskID, WorkflowID: "wf"})},
		// result: any JSON of at most 256 KiB
		{"result invalid JSON", "result", "is not valid JSON", complete(`{"a":`)},
		{"result empty", "result", "is empty", complete(``)},
		{"result 256 KiB + 1", "result", "at most 262144 bytes of JSON (got 262145)", complete(string(objectOfSize(tg.MaxResultBytes + 1)))},
		{"result duplicate keys", "result", "twice", complete(`[{"a":1,"a":1}]`)},
		{"result nested 65 deep", "result", "nests deeper than 64 levels", complete(string(nestedArray(tg.MaxJSONDepth + 1)))},
		{"result 1e400", "result", "holds the number 1e400", complete(`1e400`)},
		// error: non-empty, at most 64 KiB
		{"error empty", "error", "is required", fail("")},
		{"error 64 KiB + 1", "error", "at most 65536 bytes (got 65537)", fail(strings.Repeat("e", tg.MaxErrorBytes+1))},
		{"error invalid UTF-8", "error", "valid UTF-8", fail("bad \xff byte")},
		// holder: generation >= 1, token present and bounded
		{"generation 0", "generation", "at least 1, got 0", heartbeat(withHolder(func(h *lease.Holder) { h.Generation = 0 }), 0)},
		{"generation -1", "generation", "at least 1, got -1", heartbeat(withHolder(func(h *lease.Holder) { h.Generation = -1 }), 0)},
		{"empty claim token", "claim_token", "is required", heartbeat(withHolder(func(h *lease.Holder) { h.Token = "" }), 0)},
		{"claim token too long", "claim_token", "at most 128 bytes", heartbeat(withHolder(func(h *lease.Holder) { h.Token = strings.Repeat("t", tg.MaxTokenLen+1) }), 0)},
		{"empty task id on heartbeat", "task_id", "is required", heartbeat(withHolder(func(h *lease.Holder) { h.TaskID = "" }), 0)},
		{"empty task id on read", "task_id", "is required", func(f validationFixture) error { _, err := f.S.Task(ctx, ""); return err }},
		// operator operations: name and reason required and bounded
		{"requeue without operator", "operator", "is required", func(f validationFixture) error {
			_, err := f.S.Requeue(ctx, f.live.Task.TaskID, tg.Operator{Reason: "why"})
			return err
		}},
		{"requeue without reason", "reason", "is required", func(f validationFixture) error {
			_, err := f.S.Requeue(ctx, f.live.Task.TaskID, tg.Operator{Name: "alice"})
			return err
		}},
		{"skip without operator", "operator", "is required", func(f validationFixture) error {
			_, err := f.S.Skip(ctx, f.live.Task.TaskID, tg.Operator{Reason: "why"})
			return err
		}},
		{"skip without reason", "reason", "is required", func(f validationFixture) error {
			_, err := f.S.Skip(ctx, f.live.Task.TaskID, tg.Operator{Name: "alice"})
			return err
		}},
		{"abort without operator", "operator", "is required", func(f validationFixture) error {
			_, err := f.S.AbortWorkflow(ctx, "wf", tg.Operator{Reason: "why"})
			return err
		}},
		{"abort without reason", "reason", "is required", func(f validationFixture) error {
			_, err := f.S.AbortWorkflow(ctx, "wf", tg.Operator{Name: "alice"})
			return err
		}},
		{"operator name too long", "operator", "at most 128 bytes", func(f validationFixture) error {
			_, err := f.S.Skip(ctx, f.live.Task.TaskID, tg.Operator{Name: long, Reason: "why"})
			return err
		}},
		{"operator reason too long", "reason", "at most 4096 bytes", func(f validationFixture) error {
			_, err := f.S.Skip(ctx, f.live.Task.TaskID, tg.Operator{Name: "alice", Reason: strings.Repeat("r", tg.MaxReasonBytes+1)})
			return err
		}},
		{"abort of a bad workflow id", "workflow_id", "must match", func(f validationFixture) error {
			_, err := f.S.AbortWorkflow(ctx, "a/b", tg.Operator{Name: "alice", Reason: "why"})
			return err
		}},
		{"cancel reason too long", "reason", "at most 4096 bytes", func(f validationFixture) error {
			_, _, err := f.S.CancelTask(ctx, f.live.Task.TaskID, strings.Repeat("r", tg.MaxReasonBytes+1))
			return err
		}},
		// listing filters
		{"list limit negative", "limit", "between 1 and 10000", func(f validationFixture) error { _, err := f.S.ListTasks(ctx, tg.ListFilter{Limit: -1}); return err }},
		{"list limit too big", "limit", "between 1 and 10000 (got 10001)", func(f validationFixture) error {
			_, err := f.S.ListTasks(ctx, tg.ListFilter{Limit: tg.MaxTasksPerWorkflow + 1})
			return err
		}},
		{"list unknown state", "state", "must be one of", func(f validationFixture) error {
			_, err := f.S.ListTasks(ctx, tg.ListFilter{State: "done"})
			return err
		}},
	}...)

	before := f.DB.Snapshot(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call(f)
			if !errors.Is(err, tg.ErrInvalid) {
				t.Fatalf("err = %v, want tg.ErrInvalid", err)
			}
			var ve *tg.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("err = %v (%T), want a *tg.ValidationError", err, err)
			}
			if ve.Field != tc.field {
				t.Errorf("field %q, want %q (%v)", ve.Field, tc.field, err)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.field) || !strings.Contains(msg, tc.rule) {
				t.Errorf("message %q does not name the field %q and the rule %q", msg, tc.field, tc.rule)
			}
			if errors.Is(err, tg.ErrNotFound) || errors.Is(err, tg.ErrConflict) || errors.Is(err, tg.ErrStaleClaim) {
				t.Errorf("a validation error also matches another sentinel: %v", err)
			}
			if after := f.DB.Snapshot(t); after != before {
				t.Fatalf("the database changed")
			}
		})
	}
	// The live claim was never disturbed by all of that.
	if _, err := f.S.Heartbeat(ctx, holder(f.live), 0); err != nil {
		t.Fatalf("heartbeat of the live claim after the bad inputs: %v", err)
	}
}

// A malformed task id cannot name any task: it is reported as not found,
// whatever the operation, and nothing is written.
func testMalformedTaskIDNotFound(t *testing.T, h Harness) {
	f := newValidationFixture(t, h)
	ctx := f.Ctx
	good := f.pending.TaskID
	op := tg.Operator{Name: "alice", Reason: "why"}
	for _, id := range []string{"abc", strings.ToLower(good), good + "0", good[:25], good[:25] + "-", "01ARZ3NDEKTSV4RRFFQ69G5FA/", "01ARZ3NDEKTSV4RRFFQ69G5FAV"} {
		for name, call := range map[string]func() error{
			"read":      func() error { _, err := f.S.Task(ctx, id); return err },
			"events":    func() error { _, err := f.S.TaskEvents(ctx, id); return err },
			"claim":     func() error { _, _, err := f.S.Claim(ctx, tg.ClaimRequest{Owner: "w", TaskID: id}); return err },
			"heartbeat": func() error { h := holder(f.live); h.TaskID = id; _, err := f.S.Heartbeat(ctx, h, 0); return err },
			"complete": func() error {
				h := holder(f.live)
				h.TaskID = id
				_, err := f.S.Complete(ctx, h, json.RawMessage(`1`))
				return err
			},
			"requeue": func() error { _, err := f.S.Requeue(ctx, id, op); return err },
			"skip":    func() error { _, err := f.S.Skip(ctx, id, op); return err },
			"cancel":  func() error { _, _, err := f.S.CancelTask(ctx, id, ""); return err },
		} {
			if name == "events" && id == "01ARZ3NDEKTSV4RRFFQ69G5FAV" {
				continue // the history of a well-formed unknown id is empty, not an error
			}
			before := f.DB.Snapshot(t)
			err := call()
			if !errors.Is(err, tg.ErrNotFound) {
				t.Errorf("%s %q: %v, want tg.ErrNotFound", name, id, err)
			}
			if errors.Is(err, tg.ErrInvalid) {
				t.Errorf("%s %q: a malformed id is reported as invalid input: %v", name, id, err)
			}
			if f.DB.Snapshot(t) != before {
				t.Errorf("%s %q: the database changed", name, id)
			}
		}
	}
}

// The accepted edge of every bound: the largest or smallest value allowed is
// accepted, and zero selects the documented default.
func testBoundsAccepted(t *testing.T, h Harness) {
	e := setup(t, h)
	ctx := e.Ctx
	id128 := "A" + strings.Repeat("z", tg.MaxIdentifierLen-1)
	if !tg.ValidIdentifier(id128) || tg.ValidIdentifier(id128+"z") {
		t.Fatal("tg.ValidIdentifier disagrees with the 128-character bound")
	}
	for _, id := range []string{id128, "0", "a.b:c-d_e", "Z9"} {
		if _, err := e.S.CreateTask(ctx, id, tg.NodeSpec{NodeID: id}); err != nil {
			t.Errorf("identifier %q rejected: %v", id, err)
		}
	}
	mk := func(node string, spec tg.NodeSpec) tg.Task {
		t.Helper()
		spec.NodeID = node
		c, err := e.S.CreateTask(ctx, "wf", spec)
		if err != nil {
			t.Fatalf("create %s: %v", node, err)
		}
		return c.Task
	}
	big := mk("big", tg.NodeSpec{Payload: objectOfSize(tg.MaxPayloadBytes)})
	if len(big.Payload) != tg.MaxPayloadBytes {
		t.Fatalf("stored payload is %d bytes", len(big.Payload))
	}
	// Whitespace does not count against the bound: it is compacted away.
	spaced := json.RawMessage(strings.Replace(string(objectOfSize(tg.MaxPayloadBytes)), `:`, ` :  `, 1) + "\n\t ")
	if got := mk("spaced", tg.NodeSpec{Payload: spaced}); len(got.Payload) != tg.MaxPayloadBytes {
		t.Fatalf("spaced payload stored as %d bytes", len(got.Payload))
	}
	mk("deep", tg.NodeSpec{Payload: nestedObject(tg.MaxJSONDepth)})
	if got := mk("nullpayload", tg.NodeSpec{Payload: json.RawMessage(`null`)}); string(got.Payload) != `{}` {
		t.Fatalf("null payload stored as %s", got.Payload)
	}
	for name, want := range map[string]int{"ma0": tg.DefaultMaxAttempts, "ma1": 1, "ma100": 100} {
		n := map[string]int{"ma0": 0, "ma1": 1, "ma100": 100}[name]
		if got := mk(name, tg.NodeSpec{MaxAttempts: n}); got.MaxAttempts != want {
			t.Errorf("max_attempts %d stored as %d, want %d", n, got.MaxAttempts, want)
		}
	}
	deps := make([]string, tg.MaxDependsOn)
	specs := make([]tg.NodeSpec, 0, tg.MaxDependsOn+1)
	for i := range deps {
		deps[i] = fmt.Sprintf("dep%02d", i)
		specs = append(specs, tg.NodeSpec{NodeID: deps[i]})
	}
	specs = append(specs, tg.NodeSpec{NodeID: "fanin", DependsOn: deps})
	if out, err := e.S.CreateWorkflow(ctx, "fan", specs); err != nil || out[tg.MaxDependsOn].Task.State != tg.StateBlocked || len(out[tg.MaxDependsOn].Task.DependsOn) != tg.MaxDependsOn {
		t.Fatalf("64 dependencies: %v", err)
	}

	// Leases: 0 is the default, 1 s and 15 min are allowed, on claims and heartbeats.
	for _, tc := range []struct{ req, want time.Duration }{
		{0, lease.DefaultDuration}, {lease.MinDuration, lease.MinDuration}, {lease.MaxDuration, lease.MaxDuration},
	} {
		tk := mk(fmt.Sprintf("lease%d", tc.req.Milliseconds()), tg.NodeSpec{})
		c := e.Claim(t, "w", tk.TaskID, tc.req)
		if !c.Lease.ExpiresAt.Equal(e.Clock.Now().Add(tc.want)) {
			t.Errorf("lease %v expires at %v, want now + %v", tc.req, c.Lease.ExpiresAt, tc.want)
		}
		hb, err := e.S.Heartbeat(ctx, holder(c), tc.req)
		if err != nil || !hb.LeaseExpiresAt.Equal(e.Clock.Now().Add(tc.want)) {
			t.Errorf("heartbeat %v: %v %v", tc.req, hb.LeaseExpiresAt, err)
		}
		// Results: any JSON value, up to 256 KiB; errors up to 64 KiB.
		switch tc.req {
		case 0:
			if _, err := e.S.Complete(ctx, holder(c), objectOfSize(tg.MaxResultBytes)); err != nil {
				t.Errorf("256 KiB result: %v", err)
			}
		case lease.MinDuration:
			if _, err := e.S.Complete(ctx, holder(c), nestedArray(tg.MaxJSONDepth)); err != nil {
				t.Errorf("64-deep result: %v", err)
			}
		default:
			if _, err := e.S.Fail(ctx, holder(c), strings.Repeat("e", tg.MaxErrorBytes), false); err != nil {
				t.Errorf("64 KiB error: %v", err)
			}
		}
	}
	for i, res := range []string{`null`, `true`, `"text"`, `-1.5e3`, `[]`, `{}`, ` [1, {"a": null}] `} {
		tk := mk(fmt.Sprintf("res%d", i), tg.NodeSpec{})
		c := e.Claim(t, "w", tk.TaskID, 0)
		done, err := e.S.Complete(ctx, holder(c), json.RawMessage(res))
		if err != nil || done.State != tg.StateCompleted {
			t.Errorf("result %s: %v", res, err)
		} else if want := strings.ReplaceAll(strings.TrimSpace(res), " ", ""); string(done.Result) != want {
			t.Errorf("result %s stored as %s, want %s", res, done.Result, want)
		}
	}
	// wait: 30 s is allowed (a pending task is there, so it returns at once).
	mk("waitable", tg.NodeSpec{})
	if _, ok, err := e.S.Claim(ctx, tg.ClaimRequest{Owner: "w", WorkflowID: "wf", Wait: tg.MaxClaimWait}); err != nil || !ok {
		t.Fatalf("wait 30 s: %v %v", ok, err)
	}
	e.Verify(t)
}

// A workflow holds at most 10,000 tasks: the 10,001st fails whether it comes
// alone or with nodes that already exist, and nothing is written.
func testTasksPerWorkflowBound(t *testing.T, h Harness) {
	if testing.Short() {
		t.Skip("creates 10,000 tasks")
	}
	e := setup(t, h)
	nodes := make([]tg.NodeSpec, tg.MaxTasksPerWorkflow)
	for i := range nodes {
		nodes[i] = tg.NodeSpec{NodeID: fmt.Sprintf("n%05d", i)}
	}
	if _, err := e.S.CreateWorkflow(e.Ctx, "full", nodes); err != nil {
		t.Fatal(err)
	}
	before := e.DB.Snapshot(t)
	for name, call := range map[string]func() error{
		"alone": func() error { _, err := e.S.CreateTask(e.Ctx, "full", tg.NodeSpec{NodeID: "one-more"}); return err },
		"with existing nodes": func() error {
			_, err := e.S.CreateWorkflow(e.Ctx, "full", []tg.NodeSpec{nodes[0], {NodeID: "one-more", DependsOn: []string{"n00000"}}})
			return err
		},
	} {
		err := call()
		var ve *tg.ValidationError
		if !errors.Is(err, tg.ErrInvalid) || !errors.As(err, &ve) || ve.Field != "workflow_id" || !strings.Contains(err.Error(), "would exceed 10000 tasks") {
			t.Errorf("%s: %v, want the 10,000-task bound on workflow_id", name, err)
		}
		if e.DB.Snapshot(t) != before {
			t.Errorf("%s: the database changed", name)
		}
	}
	// Repeating an existing node of a full workflow is still idempotent.
	if out, err := e.S.CreateTask(e.Ctx, "full", nodes[9999]); err != nil || out.Created {
		t.Fatalf("idempotent repeat in a full workflow: %+v %v", out, err)
	}
	// Another workflow is not affected.
	e.Create(t, "other", "x")
}
