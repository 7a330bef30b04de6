package drivertest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// updateTests: the guarded updates, through each of the three ways a
// driver applies them (Tx.UpdateTask, the updates of Tx.Fetch and of
// Tx.Apply), which must mean the same.
var updateTests = []test{
	{"OptMeaning", testOptMeaning},
	{"Guards", testGuards},
	{"ApplyGuardFailedRollsBack", testApplyGuardFailed},
	{"SeqBeforeTaskID", testSeqBeforeTaskID},
	{"InOrderGiven", testUpdatesInOrder},
	{"ManyOfOneShape", testManyOfOneShape},
	{"BadUpdates", testBadUpdates},
}

// updatePath is one way of applying guarded updates in a transaction.
type updatePath struct {
	name string
	// byID: the path can find a task by id (TaskUpdate.TaskID).
	byID bool
	// readBack: the path returns no rows (Apply); run reads each task
	// after the call, so an update's row is its task as the last update
	// of the call left it.
	readBack bool
	// run applies ups and returns what each did. Apply's fails as a
	// whole (ErrGuardFailed) when a guard does not hold.
	run func(e *env, tx tgdriver.Tx, ups []tgdriver.TaskUpdate) ([]tgdriver.Updated, error)
}

var updatePaths = []updatePath{
	{"UpdateTask", false, false, func(e *env, tx tgdriver.Tx, ups []tgdriver.TaskUpdate) ([]tgdriver.Updated, error) {
		out := make([]tgdriver.Updated, len(ups))
		for i, u := range ups {
			r, ok, err := tx.UpdateTask(e.ctx, u.Seq, u.Set, u.Guard)
			if err != nil {
				return nil, err
			}
			out[i] = tgdriver.Updated{Row: r, OK: ok}
		}
		return out, nil
	}},
	{"Fetch", true, false, func(e *env, tx tgdriver.Tx, ups []tgdriver.TaskUpdate) ([]tgdriver.Updated, error) {
		f, err := tx.Fetch(e.ctx, tgdriver.Fetch{Updates: ups})
		if err != nil {
			return nil, err
		}
		if len(f.Updated) != len(ups) {
			return nil, fmt.Errorf("the results of Fetch: %d for %d updates", len(f.Updated), len(ups))
		}
		return f.Updated, nil
	}},
	{"Apply", true, true, func(e *env, tx tgdriver.Tx, ups []tgdriver.TaskUpdate) ([]tgdriver.Updated, error) {
		if err := tx.Apply(e.ctx, tgdriver.Apply{Updates: ups}); err != nil {
			return nil, err
		}
		// Apply returns no rows: what it wrote is read back in its
		// transaction.
		out := make([]tgdriver.Updated, len(ups))
		for i, u := range ups {
			var r tgdriver.TaskRow
			var err error
			if u.Seq != 0 {
				r, err = tx.TaskBySeq(e.ctx, u.Seq)
			} else {
				r, err = tx.TaskByID(e.ctx, u.TaskID)
			}
			if err != nil {
				return nil, fmt.Errorf("read back the task of update %d of Apply: %w", i, err)
			}
			out[i] = tgdriver.Updated{Row: r, OK: true}
		}
		return out, nil
	}},
}

// eachPath runs fn as a subtest per update path, each on a fresh database.
func eachPath(t *testing.T, h Harness, fn func(t *testing.T, e *env, p updatePath)) {
	for _, p := range updatePaths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			fn(t, newEnv(t, h), p)
		})
	}
}

// ref makes the update of task r find it by seq, or by id on paths that
// can when byID.
func ref(p updatePath, r tgdriver.TaskRow, byID bool, set tgdriver.TaskSet, g tgdriver.TaskGuard) tgdriver.TaskUpdate {
	if byID && p.byID {
		return tgdriver.TaskUpdate{TaskID: r.TaskID, Set: set, Guard: g}
	}
	return tgdriver.TaskUpdate{Seq: r.Seq, Set: set, Guard: g}
}

// apply runs ups through p in one transaction and fails the test on an
// error.
func (e *env) apply(p updatePath, ups []tgdriver.TaskUpdate) []tgdriver.Updated {
	e.t.Helper()
	var out []tgdriver.Updated
	e.write(func(tx tgdriver.Tx) error {
		var err error
		out, err = p.run(e, tx, ups)
		return err
	})
	return out
}

// inserted inserts rows and returns them with their seqs.
func (e *env) inserted(rows ...tgdriver.TaskRow) []tgdriver.TaskRow {
	e.t.Helper()
	out := append([]tgdriver.TaskRow(nil), rows...)
	for i, s := range e.insert(rows...) {
		out[i].Seq = s
	}
	return out
}

const updatedColumns = `SELECT state, owner, generation, token_hash, lease_expires_at_ms, lease_ms, attempts, unmet, result, error,
	status_message, cancel_cause, due_at_ms, updated_at_ms FROM tasks WHERE seq = ?`

// testOptMeaning: Val sets exactly its value, zero values included (an
// empty owner, token, result or error, a zero lease expiry, cancel cause,
// generation, attempt count, unmet count, due time): the value, not NULL.
// Null sets NULL. Unset columns keep their value; AddAttempt adds one. The
// row returned, the row read back and the stored value agree. A zero lease
// duration is refused by the schema (lease_ms > 0): the update fails rather
// than store NULL.
func testOptMeaning(t *testing.T, h Harness) {
	eachPath(t, h, func(t *testing.T, e *env, p updatePath) {
		rows := e.inserted(fullTask("wf", "zero"), fullTask("wf", "null"), fullTask("wf", "val"), fullTask("wf", "add"))
		zeroSet := tgdriver.TaskSet{State: tgdriver.Val("pending"), Owner: tgdriver.Val(""), Generation: tgdriver.Val[int64](0),
			TokenHash: tgdriver.Val([]byte{}), LeaseExpiresAtMS: tgdriver.Val[int64](0),
			Attempts: tgdriver.Val(0), Unmet: tgdriver.Val(0), Result: tgdriver.Val(""), Error: tgdriver.Val(""),
			StatusMessage: tgdriver.Val(""), CancelCause: tgdriver.Val[int64](0), DueAtMS: tgdriver.Val[int64](0), UpdatedAtMS: 0}
		nullSet := tgdriver.TaskSet{Owner: tgdriver.Null[string](), TokenHash: tgdriver.Null[[]byte](),
			LeaseExpiresAtMS: tgdriver.Null[int64](), LeaseMS: tgdriver.Null[int64](), Result: tgdriver.Null[string](),
			Error: tgdriver.Null[string](), CancelCause: tgdriver.Null[int64](), UpdatedAtMS: 5}
		valSet := tgdriver.TaskSet{State: tgdriver.Val("failed"), Owner: tgdriver.Val("w9"), Generation: tgdriver.Val[int64](9),
			TokenHash: tgdriver.Val([]byte("t9")), LeaseExpiresAtMS: tgdriver.Val[int64](99), LeaseMS: tgdriver.Val[int64](98),
			Attempts: tgdriver.Val(7), Unmet: tgdriver.Val(1), Result: tgdriver.Val(`[9]`), Error: tgdriver.Val("e9"),
			StatusMessage: tgdriver.Val("s9"), CancelCause: tgdriver.Val[int64](97), DueAtMS: tgdriver.Val[int64](96), UpdatedAtMS: 95}
		addSet := tgdriver.TaskSet{AddAttempt: true, StatusMessage: tgdriver.Val("again"), UpdatedAtMS: 6}

		wantZero := rows[0]
		wantZero.State, wantZero.Owner, wantZero.Generation, wantZero.TokenHash = "pending", "", 0, []byte{}
		wantZero.LeaseExpiresAtMS, wantZero.Attempts, wantZero.Unmet = 0, 0, 0
		wantZero.Result, wantZero.HasResult, wantZero.Error, wantZero.StatusMessage = "", true, "", ""
		wantZero.CancelCause, wantZero.DueAtMS, wantZero.UpdatedAtMS = 0, 0, 0
		wantNull := rows[1]
		wantNull.Owner, wantNull.TokenHash, wantNull.LeaseExpiresAtMS, wantNull.LeaseMS = "", nil, 0, 0
		wantNull.Result, wantNull.HasResult, wantNull.Error, wantNull.CancelCause, wantNull.UpdatedAtMS = "", false, "", 0, 5
		wantVal := rows[2]
		wantVal.State, wantVal.Owner, wantVal.Generation, wantVal.TokenHash = "failed", "w9", 9, []byte("t9")
		wantVal.LeaseExpiresAtMS, wantVal.LeaseMS, wantVal.Attempts, wantVal.Unmet = 99, 98, 7, 1
		wantVal.Result, wantVal.HasResult, wantVal.Error, wantVal.StatusMessage = `[9]`, true, "e9", "s9"
		wantVal.CancelCause, wantVal.DueAtMS, wantVal.UpdatedAtMS = 97, 96, 95
		wantAdd := rows[3]
		wantAdd.Attempts, wantAdd.StatusMessage, wantAdd.UpdatedAtMS = rows[3].Attempts+1, "again", 6

		got := e.apply(p, []tgdriver.TaskUpdate{
			ref(p, rows[0], false, zeroSet, tgdriver.TaskGuard{}),
			ref(p, rows[1], true, nullSet, tgdriver.TaskGuard{}),
			ref(p, rows[2], false, valSet, tgdriver.TaskGuard{}),
			ref(p, rows[3], true, addSet, tgdriver.TaskGuard{}),
		})
		for i, want := range []tgdriver.TaskRow{wantZero, wantNull, wantVal, wantAdd} {
			if !got[i].OK {
				t.Errorf("%s: an unguarded update did not apply", want.NodeID)
				continue
			}
			if d := diffTask(got[i].Row, want); d != "" {
				t.Errorf("%s: the row returned: %s", want.NodeID, d)
			}
			if d := diffTask(e.task(want.Seq), want); d != "" {
				t.Errorf("%s: the row read back: %s", want.NodeID, d)
			}
		}
		raw := map[int64][]string{
			rows[0].Seq: {`"pending"`, `""`, "0", `""`, "0", "3000", "0", "0", `""`, `""`, `""`, "0", "0", "0"},
			rows[1].Seq: {`"claimed"`, "NULL", "4", "NULL", "NULL", "NULL", "2", "0", "NULL", "NULL", `"working"`, "NULL", "0", "5"},
			rows[2].Seq: {`"failed"`, `"w9"`, "9", `"t9"`, "99", "98", "7", "1", `"[9]"`, `"e9"`, `"s9"`, "97", "96", "95"},
			rows[3].Seq: {`"claimed"`, `"worker-1"`, "4", `"\x00\x01\x02\xfe\xff"`, "9000", "3000", "3", "0", `"{\"r\":1}"`, `"boom"`, `"again"`, "77", "0", "6"},
		}
		for _, r := range rows {
			if got := e.raw(updatedColumns, r.Seq); !eq(got, raw[r.Seq]) {
				t.Errorf("%s: stored %v, want %v (NULL only where Null was set)", r.NodeID, got, raw[r.Seq])
			}
		}
		before := e.dump()
		err := e.d.Write(e.ctx, func(tx tgdriver.Tx) error {
			_, err := p.run(e, tx, []tgdriver.TaskUpdate{ref(p, rows[2], true, tgdriver.TaskSet{LeaseMS: tgdriver.Val[int64](0), UpdatedAtMS: 1}, tgdriver.TaskGuard{})})
			return err
		})
		if err == nil {
			t.Error("an update to a zero lease duration succeeded; the schema allows only NULL or a positive one")
		}
		e.unchanged(before, "a refused update to a zero lease duration")
	})
}

// guardCase is one test of a TaskGuard: prep is applied first (without a
// guard) to a claimed task (owner w1, generation 3, token "tok", lease
// until 5000, unmet 0, due now), then an update guarded by guard.
type guardCase struct {
	name  string
	prep  tgdriver.TaskSet
	guard tgdriver.TaskGuard
	holds bool
}

func guardCases() []guardCase {
	val, null := tgdriver.Val[string], tgdriver.Null[string]
	i64, null64 := tgdriver.Val[int64], tgdriver.Null[int64]
	b, nullB := tgdriver.Val[[]byte], tgdriver.Null[[]byte]
	tok, other := []byte("tok"), []byte("other")
	fence := func(mod func(g *tgdriver.TaskGuard)) tgdriver.TaskGuard {
		g := tgdriver.TaskGuard{States: []string{"claimed"}, Generation: i64(3), Owner: val("w1"), TokenHash: b(tok), LeaseLiveAtMS: i64(4999)}
		if mod != nil {
			mod(&g)
		}
		return g
	}
	type S = tgdriver.TaskSet
	type G = tgdriver.TaskGuard
	return []guardCase{
		{"no test", S{}, G{}, true},
		{"state is the one", S{}, G{States: []string{"claimed"}}, true},
		{"state is not the one", S{}, G{States: []string{"pending"}}, false},
		{"state among several", S{}, G{States: []string{"pending", "claimed", "blocked"}}, true},
		{"state not among several", S{}, G{States: []string{"pending", "blocked"}}, false},
		{"generation equal", S{}, G{Generation: i64(3)}, true},
		{"generation differs", S{}, G{Generation: i64(2)}, false},
		{"generation zero equal", S{Generation: i64(0)}, G{Generation: i64(0)}, true},
		{"generation is not zero", S{}, G{Generation: i64(0)}, false},
		{"generation is never NULL", S{}, G{Generation: null64()}, false},
		{"owner equal", S{}, G{Owner: val("w1")}, true},
		{"owner differs", S{}, G{Owner: val("w2")}, false},
		{"owner empty matches empty", S{Owner: val("")}, G{Owner: val("")}, true},
		{"owner NULL is not empty", S{Owner: null()}, G{Owner: val("")}, false},
		{"owner NULL matches NULL", S{Owner: null()}, G{Owner: null()}, true},
		{"owner empty is not NULL", S{Owner: val("")}, G{Owner: null()}, false},
		{"owner set is not NULL", S{}, G{Owner: null()}, false},
		{"token equal", S{}, G{TokenHash: b(tok)}, true},
		{"token differs", S{}, G{TokenHash: b(other)}, false},
		{"token empty matches empty", S{TokenHash: b([]byte{})}, G{TokenHash: b([]byte{})}, true},
		{"token NULL is not empty", S{TokenHash: nullB()}, G{TokenHash: b([]byte{})}, false},
		{"token NULL matches NULL", S{TokenHash: nullB()}, G{TokenHash: nullB()}, true},
		{"token empty is not NULL", S{TokenHash: b([]byte{})}, G{TokenHash: nullB()}, false},
		{"lease live before its expiry", S{}, G{LeaseLiveAtMS: i64(4999)}, true},
		{"lease not live at its expiry", S{}, G{LeaseLiveAtMS: i64(5000)}, false},
		{"no lease is never live", S{LeaseExpiresAtMS: null64()}, G{LeaseLiveAtMS: i64(-1 << 40)}, false},
		{"zero lease live before zero", S{LeaseExpiresAtMS: i64(0)}, G{LeaseLiveAtMS: i64(-1)}, true},
		{"zero lease not live at zero", S{LeaseExpiresAtMS: i64(0)}, G{LeaseLiveAtMS: i64(0)}, false},
		{"no lease tested NULL", S{LeaseExpiresAtMS: null64()}, G{LeaseLiveAtMS: null64()}, true},
		{"zero lease is not NULL", S{LeaseExpiresAtMS: i64(0)}, G{LeaseLiveAtMS: null64()}, false},
		{"lease lapsed at its expiry", S{}, G{LeaseLapsedAtMS: i64(5000)}, true},
		{"lease not lapsed before its expiry", S{}, G{LeaseLapsedAtMS: i64(4999)}, false},
		{"no lease never lapses", S{LeaseExpiresAtMS: null64()}, G{LeaseLapsedAtMS: i64(1 << 40)}, false},
		{"zero lease lapsed at zero", S{LeaseExpiresAtMS: i64(0)}, G{LeaseLapsedAtMS: i64(0)}, true},
		{"no lease tested NULL for lapsed", S{LeaseExpiresAtMS: null64()}, G{LeaseLapsedAtMS: null64()}, true},
		{"no unmet", S{}, G{NoUnmet: true}, true},
		{"unmet", S{Unmet: tgdriver.Val(1)}, G{NoUnmet: true}, false},
		{"due at its time", S{DueAtMS: i64(9000)}, G{DueByMS: i64(9000)}, true},
		{"not due before its time", S{DueAtMS: i64(9000)}, G{DueByMS: i64(8999)}, false},
		{"due now is due at zero", S{}, G{DueByMS: i64(0)}, true},
		{"fence holds", S{}, fence(nil), true},
		{"fence, wrong state", S{}, fence(func(g *G) { g.States = []string{"pending"} }), false},
		{"fence, wrong generation", S{}, fence(func(g *G) { g.Generation = i64(4) }), false},
		{"fence, wrong owner", S{}, fence(func(g *G) { g.Owner = val("w2") }), false},
		{"fence, wrong token", S{}, fence(func(g *G) { g.TokenHash = b(other) }), false},
		{"fence, lapsed lease", S{}, fence(func(g *G) { g.LeaseLiveAtMS = i64(5000) }), false},
		{"fence and more", S{}, fence(func(g *G) { g.NoUnmet, g.DueByMS = true, i64(0) }), true},
	}
}

// guardTasks inserts a claimed task per case and applies the cases'
// preps; it returns the tasks as prepared.
func guardTasks(e *env, cases []guardCase) []tgdriver.TaskRow {
	e.t.Helper()
	rows := make([]tgdriver.TaskRow, len(cases))
	for i := range cases {
		r := task("wf", fmt.Sprintf("g%02d", i))
		r.State, r.Owner, r.Generation, r.TokenHash = "claimed", "w1", 3, []byte("tok")
		r.LeaseExpiresAtMS, r.LeaseMS = 5000, 1000
		rows[i] = r
	}
	rows = e.inserted(rows...)
	e.write(func(tx tgdriver.Tx) error {
		for i, c := range cases {
			set := c.prep
			set.UpdatedAtMS = 1
			r, ok, err := tx.UpdateTask(e.ctx, rows[i].Seq, set, tgdriver.TaskGuard{})
			if err != nil || !ok {
				return fmt.Errorf("prep %q: %v %v", c.name, ok, err)
			}
			rows[i] = r
		}
		return nil
	})
	return rows
}

// hit is the update every guard case guards.
var hit = tgdriver.TaskSet{StatusMessage: tgdriver.Val("hit"), UpdatedAtMS: 7777}

// testGuards: every test of a TaskGuard, holding and not, through each
// path; a guard that does not hold changes nothing (UpdateTask and Fetch
// answer ok false, Apply fails: see testApplyGuardFailed). On Fetch and
// Apply every case is one update of one call: many updates of mixed
// shapes, by seq and by id.
func testGuards(t *testing.T, h Harness) {
	eachPath(t, h, func(t *testing.T, e *env, p updatePath) {
		cases := guardCases()
		rows := guardTasks(e, cases)
		var ups []tgdriver.TaskUpdate
		var idx []int
		for i, c := range cases {
			if p.name == "Apply" && !c.holds {
				continue // Apply fails as a whole: testApplyGuardFailed
			}
			ups = append(ups, ref(p, rows[i], i%2 == 1, hit, c.guard))
			idx = append(idx, i)
		}
		var missing tgdriver.TaskUpdate
		if p.name != "Apply" {
			missing = tgdriver.TaskUpdate{Seq: 999999, Set: hit}
			ups = append(ups, missing)
		}
		got := e.apply(p, ups)
		for k, i := range idx {
			c, r := cases[i], rows[i]
			if got[k].OK != c.holds {
				t.Errorf("%s: ok %v, want %v", c.name, got[k].OK, c.holds)
			}
			want := r
			if c.holds {
				want.StatusMessage, want.UpdatedAtMS = "hit", 7777
				if d := diffTask(got[k].Row, want); got[k].OK && d != "" {
					t.Errorf("%s: the row returned: %s", c.name, d)
				}
			}
			if d := diffTask(e.task(r.Seq), want); d != "" {
				t.Errorf("%s (holds %v): the row read back: %s", c.name, c.holds, d)
			}
		}
		if p.name != "Apply" && got[len(got)-1].OK {
			t.Error("an update of a missing task says it applied")
		}
	})
}

// testApplyGuardFailed: when an update of Apply does not hold its guard
// (or its task is missing), Apply fails with ErrGuardFailed, and the
// caller's transaction rolls back: nothing of it is left, neither the
// round's other updates and events nor what the transaction wrote before.
func testApplyGuardFailed(t *testing.T, h Harness) {
	e := newEnv(t, h)
	cases := guardCases()
	rows := guardTasks(e, cases)
	spare := e.inserted(task("wf", "spare"))[0]
	before := e.dump()
	fail := func(name string, u tgdriver.TaskUpdate) {
		t.Helper()
		err := e.d.Write(e.ctx, func(tx tgdriver.Tx) error {
			if err := tx.TouchAlive(e.ctx, 4242); err != nil {
				return err
			}
			if _, _, err := tx.UpdateTask(e.ctx, spare.Seq, tgdriver.TaskSet{State: tgdriver.Val("claimed"), UpdatedAtMS: 3}, tgdriver.TaskGuard{}); err != nil {
				return err
			}
			err := tx.Apply(e.ctx, tgdriver.Apply{
				Updates: []tgdriver.TaskUpdate{{TaskID: spare.TaskID, Set: hit, Guard: tgdriver.TaskGuard{States: []string{"claimed"}}}, u},
				Events:  []tgdriver.EventRow{ev("wf", 0, "", "")},
				Journal: true,
			})
			return err
		})
		if !errors.Is(err, tgdriver.ErrGuardFailed) {
			t.Errorf("%s: Apply: %v, want ErrGuardFailed", name, err)
		}
	}
	for i, c := range cases {
		if !c.holds {
			fail(c.name, ref(updatePaths[2], rows[i], i%2 == 1, hit, c.guard))
		}
	}
	fail("missing task by seq", tgdriver.TaskUpdate{Seq: 999999, Set: hit})
	fail("missing task by id", tgdriver.TaskUpdate{TaskID: "none", Set: hit})
	e.unchanged(before, "transactions whose Apply failed its guard")
	// Linked events whose chain head moved fail Apply too, and roll back.
	err := e.d.Write(e.ctx, func(tx tgdriver.Tx) error {
		err := tx.Apply(e.ctx, tgdriver.Apply{
			Updates: []tgdriver.TaskUpdate{{Seq: spare.Seq, Set: hit}},
			Events:  []tgdriver.EventRow{ev("wf", 1, "not-the-head", "h1")},
		})
		return err
	})
	if !errors.Is(err, tgdriver.ErrChainMoved) {
		t.Errorf("Apply of events linked to a moved head: %v, want ErrChainMoved", err)
	}
	e.unchanged(before, "a transaction whose Apply met a moved chain head")
}

// testSeqBeforeTaskID: an update finds its task by Seq, and by TaskID
// only when Seq is 0.
func testSeqBeforeTaskID(t *testing.T, h Harness) {
	eachPath(t, h, func(t *testing.T, e *env, p updatePath) {
		if !p.byID {
			t.Skip("finds tasks by seq only")
		}
		rows := e.inserted(task("wf", "a"), task("wf", "b"))
		got := e.apply(p, []tgdriver.TaskUpdate{{Seq: rows[0].Seq, TaskID: rows[1].TaskID, Set: hit}})
		if !got[0].OK || got[0].Row.Seq != rows[0].Seq {
			t.Fatalf("update with a seq and another task's id updated %d (ok %v), want %d", got[0].Row.Seq, got[0].OK, rows[0].Seq)
		}
		if a, b := e.task(rows[0].Seq), e.task(rows[1].Seq); a.StatusMessage != "hit" || b.StatusMessage != "ready" {
			t.Fatalf("after the update: a %q, b %q; want a hit and b untouched", a.StatusMessage, b.StatusMessage)
		}
	})
}

// testUpdatesInOrder: the updates of one call apply in the order given,
// each on the task as the ones before it left it, whether they share a
// shape or not and however often one task appears.
func testUpdatesInOrder(t *testing.T, h Harness) {
	eachPath(t, h, func(t *testing.T, e *env, p updatePath) {
		x := e.inserted(fullTask("wf", "x"))[0]
		i64 := tgdriver.Val[int64]
		status := func(s string) tgdriver.TaskSet {
			return tgdriver.TaskSet{StatusMessage: tgdriver.Val(s), UpdatedAtMS: 10}
		}
		withErr := tgdriver.TaskSet{StatusMessage: tgdriver.Val("second"), Error: tgdriver.Val("e2"), UpdatedAtMS: 11}
		bump := func(from int64) tgdriver.TaskUpdate {
			return ref(p, x, from%2 == 0, tgdriver.TaskSet{Generation: i64(from + 1), UpdatedAtMS: 12}, tgdriver.TaskGuard{Generation: i64(from)})
		}
		ups := []tgdriver.TaskUpdate{
			ref(p, x, false, status("first"), tgdriver.TaskGuard{}),
			ref(p, x, true, withErr, tgdriver.TaskGuard{}),
			ref(p, x, false, status("third"), tgdriver.TaskGuard{}),
			bump(4), bump(5), bump(6),
		}
		got := e.apply(p, ups)
		wantStatus := []string{"first", "second", "third", "third", "third", "third"}
		wantGen := []int64{4, 4, 4, 5, 6, 7}
		if p.readBack {
			// Each row is the task after the call; the bumps' guards
			// held only in the order given (else ErrGuardFailed).
			wantStatus = []string{"third", "third", "third", "third", "third", "third"}
			wantGen = []int64{7, 7, 7, 7, 7, 7}
		}
		for i, u := range got {
			if !u.OK || u.Row.StatusMessage != wantStatus[i] || u.Row.Generation != wantGen[i] {
				t.Errorf("update %d: ok %v, status %q, generation %d; want ok, %q, %d (applied in the order given)",
					i, u.OK, u.Row.StatusMessage, u.Row.Generation, wantStatus[i], wantGen[i])
			}
		}
		if r := e.task(x.Seq); r.StatusMessage != "third" || r.Error != "e2" || r.Generation != 7 {
			t.Errorf("after the call: status %q, error %q, generation %d; want third, e2, 7", r.StatusMessage, r.Error, r.Generation)
		}
	})
}

// testManyOfOneShape: many updates of one shape in one call each apply to
// their own task with their own values, and each answers for itself.
func testManyOfOneShape(t *testing.T, h Harness) {
	eachPath(t, h, func(t *testing.T, e *env, p updatePath) {
		var rows []tgdriver.TaskRow
		for i := range 8 {
			r := task("wf", fmt.Sprintf("n%d", i))
			r.State, r.Owner, r.Generation, r.TokenHash, r.LeaseExpiresAtMS = "claimed", fmt.Sprintf("w%d", i), int64(i), []byte{byte(i)}, 5000
			rows = append(rows, r)
		}
		rows = e.inserted(rows...)
		// A heartbeat per task, fenced by its own claim; on the paths that
		// answer per update, every third presents a wrong token.
		var ups []tgdriver.TaskUpdate
		holds := make([]bool, len(rows))
		for i, r := range rows {
			tokn := []byte{byte(i)}
			holds[i] = p.name == "Apply" || i%3 != 1
			if !holds[i] {
				tokn = []byte("wrong")
			}
			ups = append(ups, ref(p, r, i%2 == 0,
				tgdriver.TaskSet{LeaseExpiresAtMS: tgdriver.Val(int64(6000 + i)), UpdatedAtMS: int64(100 + i)},
				tgdriver.TaskGuard{States: []string{"claimed"}, Owner: tgdriver.Val(r.Owner), Generation: tgdriver.Val(r.Generation),
					TokenHash: tgdriver.Val(tokn), LeaseLiveAtMS: tgdriver.Val[int64](4000)}))
		}
		got := e.apply(p, ups)
		for i, r := range rows {
			want := r
			if holds[i] {
				want.LeaseExpiresAtMS, want.UpdatedAtMS = int64(6000+i), int64(100+i)
			}
			if got[i].OK != holds[i] {
				t.Errorf("update %d: ok %v, want %v", i, got[i].OK, holds[i])
			} else if holds[i] && diffTask(got[i].Row, want) != "" {
				t.Errorf("update %d: the row returned: %s", i, diffTask(got[i].Row, want))
			}
			if d := diffTask(e.task(r.Seq), want); d != "" {
				t.Errorf("task %d: %s", i, d)
			}
		}
	})
}

// testBadUpdates: an update the domain built wrong fails with ErrBadUpdate.
func testBadUpdates(t *testing.T, h Harness) {
	eachPath(t, h, func(t *testing.T, e *env, p updatePath) {
		r := e.inserted(task("wf", "a"))[0]
		for name, u := range map[string]tgdriver.TaskUpdate{
			"AddAttempt with Attempts": {Seq: r.Seq, Set: tgdriver.TaskSet{AddAttempt: true, Attempts: tgdriver.Val(1)}},
			"due time NULL":            {Seq: r.Seq, Set: tgdriver.TaskSet{DueAtMS: tgdriver.Null[int64]()}},
			"neither a seq nor a task": {Set: hit},
			"an empty state":           {Seq: r.Seq, Set: hit, Guard: tgdriver.TaskGuard{States: []string{""}}},
			"a state with a comma":     {Seq: r.Seq, Set: hit, Guard: tgdriver.TaskGuard{States: []string{"pending,claimed"}}},
		} {
			err := e.d.Write(e.ctx, func(tx tgdriver.Tx) error {
				_, err := p.run(e, tx, []tgdriver.TaskUpdate{u})
				return err
			})
			if !errors.Is(err, tgdriver.ErrBadUpdate) {
				t.Errorf("%s: %v, want ErrBadUpdate", name, err)
			}
		}
		if got := e.task(r.Seq); got.StatusMessage != "ready" || got.Attempts != 0 {
			t.Errorf("bad updates changed the task: %+v", got)
		}
	})
}
