package drivertest

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// eventTests: the linked events of a workflow's chain.
var eventTests = []test{
	{"AppendAndRead", testAppendEvents},
	{"AppendMovedHeadRollsBack", testAppendMoved},
	{"HeadKeepsTheLatestChange", testAppendUpdatedAt},
	{"OrphanEventWorkflow", testOrphanEvents},
}

// journalTests: the event journal (Info.JournalEvents), which every
// driver keeps.
var journalTests = []test{
	{"JournalAndRead", testJournal},
	{"LinkJournaled", testLinkJournaled},
	{"LockChainsAndLinkMany", testLinkMany},
	{"LinkErrorsRollBack", testLinkErrors},
}

// applyTests: Tx.Apply's events (its updates are in updateTests, its
// notifications in testChanges).
var applyTests = []test{
	{"Events", testApplyEvents},
	{"EventsTakeTheirTaskSeq", testEventTaskSeq},
}

// auditTests: the database-wide audit chain.
var auditTests = []test{
	{"Chain", testAudit},
}

// ev is event seq of workflow wf (of its task a), linked to prev with
// hash; Seq 0, prev and hash "" for an event to journal.
func ev(wf string, seq int64, prev, hash string) tgdriver.EventRow {
	return tgdriver.EventRow{WorkflowID: wf, Seq: seq, TaskID: wf + ".a", Kind: "kind" + strconv.FormatInt(seq, 10), Owner: "o",
		Generation: 1, AtMS: 3000 + seq, Detail: `{"seq":` + strconv.FormatInt(seq, 10) + `}`, PrevHash: prev, Hash: hash,
		HashVersion: 2, ActorKind: "worker", ActorName: "w1", ActorPrincipal: "p1", TaskState: `{"state":"x"}`, Content: `{"c":1}`}
}

// chain returns events from..to of wf, each linked to the one before,
// with hashes wf-1, wf-2, ...
func chain(wf string, from, to int64) []tgdriver.EventRow {
	var out []tgdriver.EventRow
	for s := from; s <= to; s++ {
		prev := ""
		if s > 1 {
			prev = wf + "-" + strconv.FormatInt(s-1, 10)
		}
		out = append(out, ev(wf, s, prev, wf+"-"+strconv.FormatInt(s, 10)))
	}
	return out
}

// sameEvent reports how got differs from want, ignoring EventID.
func sameEvent(got, want tgdriver.EventRow) string {
	if got.EventID <= 0 {
		return fmt.Sprintf("EventID %d", got.EventID)
	}
	got.EventID, want.EventID = 0, 0
	if want.HashVersion == 0 {
		want.HashVersion = 1
	}
	if got != want {
		return fmt.Sprintf("got %+v, want %+v", got, want)
	}
	return ""
}

// events reads the events of workflow wf through r.
func events(e *env, r tgdriver.Reads, wf string) ([]tgdriver.EventRow, error) {
	var out []tgdriver.EventRow
	err := r.WorkflowEvents(e.ctx, wf, func(ev tgdriver.EventRow) error { out = append(out, ev); return nil })
	return out, err
}

// testAppendEvents: AppendEvents inserts linked events, consecutive within
// each workflow (workflows may interleave), and advances each workflow's
// head; the reads of events see them.
func testAppendEvents(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.insert(task("w1", "a"), task("w1", "b"), task("w2", "a"))
	w1, w2 := chain("w1", 1, 4), chain("w2", 1, 1)
	w1[1].TaskID = "w1.b"
	w1[2].HashVersion, w1[2].ActorKind, w1[2].ActorName, w1[2].ActorPrincipal, w1[2].TaskState, w1[2].Content = 0, "", "", "", "", ""
	e.write(func(tx tgdriver.Tx) error {
		if err := tx.AppendEvents(e.ctx, []tgdriver.EventRow{w1[0], w2[0], w1[1], w1[2]}); err != nil {
			return err
		}
		if head, n, err := tx.ChainHead(e.ctx, "w1"); head != "w1-3" || n != 3 || err != nil {
			t.Errorf("ChainHead(w1) in the transaction = %q %d %v, want w1-3 3", head, n, err)
		}
		// The next call continues from the head.
		return tx.AppendEvents(e.ctx, w1[3:])
	})
	e.eachReads(func(r tgdriver.Reads) error {
		for wf, want := range map[string]tgdriver.WorkflowRow{
			"w1": {WorkflowID: "w1", TaskCount: 2, EventCount: 4, HeadHash: "w1-4", CreatedAtMS: 1000, UpdatedAtMS: 3004},
			"w2": {WorkflowID: "w2", TaskCount: 1, EventCount: 1, HeadHash: "w2-1", CreatedAtMS: 1000, UpdatedAtMS: 3001},
		} {
			if got, err := r.Workflow(e.ctx, wf); err != nil || got != want {
				return fmt.Errorf("Workflow(%s) = %+v, %v; want %+v", wf, got, err, want)
			}
		}
		got, err := events(e, r, "w1")
		if err != nil || len(got) != 4 {
			return fmt.Errorf("WorkflowEvents(w1): %d events, %v", len(got), err)
		}
		for i := range got {
			if d := sameEvent(got[i], w1[i]); d != "" {
				return fmt.Errorf("WorkflowEvents(w1)[%d] (chain order): %s", i, d)
			}
		}
		te, err := r.TaskEvents(e.ctx, "w1.a")
		if err != nil || len(te) != 3 || te[0].Seq != 1 || te[1].Seq != 3 || te[2].Seq != 4 {
			return fmt.Errorf("TaskEvents(w1.a) = %+v, %v; want events 1, 3, 4", te, err)
		}
		if d := sameEvent(te[1], w1[2]); d != "" {
			return fmt.Errorf("TaskEvents(w1.a)[1]: %s", d)
		}
		if te, err := r.TaskEvents(e.ctx, "none"); err != nil || len(te) != 0 {
			return fmt.Errorf("TaskEvents of a task without events = %+v, %v", te, err)
		}
		for _, c := range []struct {
			wf   string
			seq  int64
			hash string
		}{{"w1", 2, "w1-2"}, {"w1", 4, "w1-4"}, {"w2", 1, "w2-1"}, {"w1", 5, ""}, {"w1", 0, ""}, {"none", 1, ""}} {
			hash, ok, err := r.EventHashAt(e.ctx, c.wf, c.seq)
			if err != nil || hash != c.hash || ok != (c.hash != "") {
				return fmt.Errorf("EventHashAt(%s, %d) = %q %v %v, want %q", c.wf, c.seq, hash, ok, err, c.hash)
			}
		}
		if n, err := r.EventCount(e.ctx); err != nil || n != 5 {
			return fmt.Errorf("EventCount = %d, %v; want 5", n, err)
		}
		if kind, at, ok, err := r.LastEventOfGeneration(e.ctx, "w1.a", 1); err != nil || !ok || kind != "kind4" || at != 3004 {
			return fmt.Errorf("LastEventOfGeneration(w1.a, 1) = %q %d %v %v, want the newest, kind4 at 3004", kind, at, ok, err)
		}
		if _, _, ok, err := r.LastEventOfGeneration(e.ctx, "w1.a", 2); ok || err != nil {
			return fmt.Errorf("LastEventOfGeneration at a generation without events: %v %v", ok, err)
		}
		// WorkflowEvents stops at fn's first error and returns it.
		stop, calls := errors.New("stop"), 0
		if err := r.WorkflowEvents(e.ctx, "w1", func(tgdriver.EventRow) error { calls++; return stop }); !errors.Is(err, stop) || calls != 1 {
			return fmt.Errorf("WorkflowEvents with a failing fn: %v after %d calls, want fn's error after 1", err, calls)
		}
		return nil
	})
}

// testAppendMoved: AppendEvents whose events do not continue their
// workflow's head (a stale head, a gap, a repeat, a missing workflow, a run
// that is not consecutive) fails with ErrChainMoved, and the caller's
// rollback leaves nothing, also of the call's other workflows.
func testAppendMoved(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.insert(task("w1", "a"), task("w2", "a"))
	e.write(func(tx tgdriver.Tx) error { return tx.AppendEvents(e.ctx, chain("w1", 1, 2)) })
	before := e.dump()
	good := chain("w2", 1, 1)[0]
	for name, evs := range map[string][]tgdriver.EventRow{
		"stale head":                   {ev("w1", 3, "w1-1", "x")},
		"a gap":                        {ev("w1", 4, "w1-2", "x")},
		"a repeat":                     {ev("w1", 2, "w1-1", "x")},
		"a missing workflow":           {ev("none", 1, "", "x")},
		"not consecutive":              {ev("w1", 3, "w1-2", "w1-3"), ev("w1", 5, "w1-3", "x")},
		"not linked to the one before": {ev("w1", 3, "w1-2", "w1-3"), ev("w1", 4, "other", "x")},
		"one good workflow, one moved": {good, ev("w1", 3, "stale", "x")},
		"one moved, one good workflow": {ev("w1", 3, "stale", "x"), good},
	} {
		err := e.d.Write(e.ctx, func(tx tgdriver.Tx) error {
			if err := tx.TouchAlive(e.ctx, 99); err != nil {
				return err
			}
			return tx.AppendEvents(e.ctx, evs)
		})
		if !errors.Is(err, tgdriver.ErrChainMoved) {
			t.Errorf("%s: %v, want ErrChainMoved", name, err)
		}
	}
	e.unchanged(before, "AppendEvents that met a moved head")
}

// testAppendUpdatedAt: advancing a head records the workflow's latest
// change: the later of its last change and the last event's time.
func testAppendUpdatedAt(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.write(func(tx tgdriver.Tx) error {
		_, err := tx.EnsureWorkflow(e.ctx, "wf", 5000)
		return err
	})
	first := ev("wf", 1, "", "h1")
	first.AtMS = 4000
	e.write(func(tx tgdriver.Tx) error { return tx.AppendEvents(e.ctx, []tgdriver.EventRow{first}) })
	if w, err := e.d.Reads().Workflow(e.ctx, "wf"); err != nil || w.UpdatedAtMS != 5000 {
		t.Errorf("after an event at 4000 of a workflow changed at 5000: updated at %d (%v), want 5000", w.UpdatedAtMS, err)
	}
	second := ev("wf", 2, "h1", "h2")
	second.AtMS = 6000
	e.write(func(tx tgdriver.Tx) error { return tx.AppendEvents(e.ctx, []tgdriver.EventRow{second}) })
	if w, err := e.d.Reads().Workflow(e.ctx, "wf"); err != nil || w.UpdatedAtMS != 6000 {
		t.Errorf("after an event at 6000: updated at %d (%v), want 6000", w.UpdatedAtMS, err)
	}
}

// testOrphanEvents: OrphanEventWorkflow names a workflow that has events,
// linked or journaled, but no row.
func testOrphanEvents(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.insert(task("wf", "a"))
	e.write(func(tx tgdriver.Tx) error { return tx.AppendEvents(e.ctx, chain("wf", 1, 1)) })
	check := func(want string) {
		t.Helper()
		e.eachReads(func(r tgdriver.Reads) error {
			if wf, ok, err := r.OrphanEventWorkflow(e.ctx); err != nil || wf != want || ok != (want != "") {
				return fmt.Errorf("OrphanEventWorkflow = %q %v %v, want %q", wf, ok, err, want)
			}
			return nil
		})
	}
	check("")
	e.db.Exec(t, `INSERT INTO events (workflow_id, wseq, task_id, kind, owner, generation, at_ms, detail, prev_hash, hash)
		VALUES ('ghost', 1, 'ghost.a', 'k', '', 0, 1, '{}', '', 'g1')`)
	check("ghost")
	e.db.Exec(t, `DELETE FROM events WHERE workflow_id = 'ghost'`)
	e.write(func(tx tgdriver.Tx) error {
		return tx.JournalEvents(e.ctx, []tgdriver.EventRow{ev("ghost2", 0, "", "")})
	})
	check("ghost2")
}

// testJournal: JournalEvents records events unlinked, in the order given
// and after every entry before; JournaledEvents and JournaledWorkflows
// read the journal in that order; the reads of a task's or workflow's
// events show journaled ones (Seq 0, no link) after the linked ones, and
// LastEventOfGeneration counts a journaled event newer than any linked
// one. Journaling moves no head.
func testJournal(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.insert(task("w1", "a"), task("w1", "b"), task("w2", "a"))
	linked := chain("w1", 1, 2)
	e.write(func(tx tgdriver.Tx) error { return tx.AppendEvents(e.ctx, linked) })
	j := func(wf, taskID, kind string, gen, at int64) tgdriver.EventRow {
		x := ev(wf, 0, "", "")
		x.TaskID, x.Kind, x.Generation, x.AtMS = taskID, kind, gen, at
		return x
	}
	j1, k1, j2 := j("w1", "w1.a", "j1", 1, 100), j("w2", "w2.a", "k1", 1, 200), j("w1", "w1.b", "j2", 1, 300)
	j3 := j("w1", "w1.a", "j3", 2, 50)
	garbled := j1
	garbled.Seq, garbled.PrevHash, garbled.Hash = 7, "ignored", "ignored"
	e.write(func(tx tgdriver.Tx) error { return tx.JournalEvents(e.ctx, []tgdriver.EventRow{garbled, k1, j2}) })
	e.write(func(tx tgdriver.Tx) error { return tx.JournalEvents(e.ctx, []tgdriver.EventRow{j3}) })
	journal := []tgdriver.EventRow{j1, j2, j3}

	var got []tgdriver.EventRow
	e.write(func(tx tgdriver.Tx) error {
		var err error
		if got, err = tx.JournaledEvents(e.ctx, []string{"w1"}, 10); err != nil {
			return err
		}
		if two, err := tx.JournaledEvents(e.ctx, []string{"w1"}, 2); err != nil || len(two) != 2 || two[1].Kind != "j2" {
			t.Errorf("JournaledEvents([w1], 2) = %+v, %v; want j1, j2", two, err)
		}
		kinds := func(evs []tgdriver.EventRow) []string {
			var out []string
			for _, x := range evs {
				out = append(out, x.Kind)
			}
			return out
		}
		// Several workflows: their entries interleaved in journal order.
		for _, c := range []struct {
			wfs   []string
			limit int
			want  []string
		}{
			{[]string{"w2", "w1"}, 10, []string{"j1", "k1", "j2", "j3"}},
			{[]string{"w1", "none", "w2"}, 3, []string{"j1", "k1", "j2"}},
			{[]string{"w2"}, 10, []string{"k1"}},
			{[]string{"none"}, 10, nil},
			{nil, 10, nil},
		} {
			if evs, err := tx.JournaledEvents(e.ctx, c.wfs, c.limit); err != nil || !eq(kinds(evs), c.want) {
				t.Errorf("JournaledEvents(%v, %d) = %v, %v; want %v", c.wfs, c.limit, kinds(evs), err, c.want)
			}
		}
		return nil
	})
	if len(got) != 3 {
		t.Fatalf("JournaledEvents(w1) = %d entries, want 3", len(got))
	}
	for i := range got {
		if d := sameEvent(got[i], journal[i]); d != "" {
			t.Errorf("JournaledEvents(w1)[%d] (journal order, Seq 0, no link): %s", i, d)
		}
		if i > 0 && got[i].EventID <= got[i-1].EventID {
			t.Errorf("journal ids %d then %d: not increasing in journal order", got[i-1].EventID, got[i].EventID)
		}
	}
	e.eachReads(func(r tgdriver.Reads) error {
		if wfs, err := r.JournaledWorkflows(e.ctx, 10); err != nil || !eq(wfs, []string{"w1", "w2"}) {
			return fmt.Errorf("JournaledWorkflows(10) = %v, %v; want [w1 w2] (oldest entry first)", wfs, err)
		}
		if wfs, err := r.JournaledWorkflows(e.ctx, 1); err != nil || !eq(wfs, []string{"w1"}) {
			return fmt.Errorf("JournaledWorkflows(1) = %v, %v; want [w1]", wfs, err)
		}
		if w, err := r.Workflow(e.ctx, "w1"); err != nil || w.EventCount != 2 || w.HeadHash != "w1-2" {
			return fmt.Errorf("Workflow(w1) after journaling = %+v, %v; want its head unmoved (2, w1-2)", w, err)
		}
		if n, err := r.EventCount(e.ctx); err != nil || n != 2 {
			return fmt.Errorf("EventCount = %d, %v; want 2 (the linked events)", n, err)
		}
		all, err := events(e, r, "w1")
		want := []tgdriver.EventRow{linked[0], linked[1], j1, j2, j3}
		if err != nil || len(all) != len(want) {
			return fmt.Errorf("WorkflowEvents(w1) = %d events, %v; want %d", len(all), err, len(want))
		}
		for i := range want {
			if d := sameEvent(all[i], want[i]); d != "" {
				return fmt.Errorf("WorkflowEvents(w1)[%d] (linked, then journaled in journal order): %s", i, d)
			}
		}
		te, err := r.TaskEvents(e.ctx, "w1.a")
		if err != nil || len(te) != 4 || te[0].Kind != "kind1" || te[1].Kind != "kind2" || te[2].Kind != "j1" || te[3].Kind != "j3" {
			return fmt.Errorf("TaskEvents(w1.a) = %+v, %v; want kind1, kind2, j1, j3", te, err)
		}
		for _, c := range []struct {
			task  string
			gen   int64
			kind  string
			at    int64
			found bool
		}{
			{"w1.a", 1, "j1", 100, true}, // journaled: newer than the linked kind2 at 3002
			{"w1.a", 2, "j3", 50, true},
			{"w1.b", 1, "j2", 300, true},
			{"w1.a", 9, "", 0, false},
		} {
			kind, at, ok, err := r.LastEventOfGeneration(e.ctx, c.task, c.gen)
			if err != nil || kind != c.kind || at != c.at || ok != c.found {
				return fmt.Errorf("LastEventOfGeneration(%s, %d) = %q %d %v %v, want %q %d %v", c.task, c.gen, kind, at, ok, err, c.kind, c.at, c.found)
			}
		}
		return nil
	})
}

// journaled journals evs and returns them, with the workflow's events
// journaled before, as JournaledEvents reads them,
// linked onto head (hash, count) of their workflow: what a linker passes to
// LinkJournaled.
func journaled(e *env, wf string, evs []tgdriver.EventRow, head string, count int64) []tgdriver.EventRow {
	e.t.Helper()
	var out []tgdriver.EventRow
	e.write(func(tx tgdriver.Tx) error {
		if err := tx.JournalEvents(e.ctx, evs); err != nil {
			return err
		}
		var err error
		out, err = tx.JournaledEvents(e.ctx, []string{wf}, 100)
		return err
	})
	for i := range out {
		count++
		out[i].Seq, out[i].PrevHash, out[i].Hash = count, head, wf+"-"+strconv.FormatInt(count, 10)
		head = out[i].Hash
	}
	return out
}

// testLinkJournaled: LinkJournaled moves journaled events into the chain
// with the links given, removes their entries (only theirs) and advances
// the head; a workflow's journal may be linked in parts, a journal write's
// events at a time.
func testLinkJournaled(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.insert(task("w1", "a"), task("w2", "a"))
	e.write(func(tx tgdriver.Tx) error { return tx.AppendEvents(e.ctx, chain("w1", 1, 1)) })
	e.write(func(tx tgdriver.Tx) error { return tx.JournalEvents(e.ctx, []tgdriver.EventRow{ev("w2", 0, "", "")}) })
	body := func(kind string) tgdriver.EventRow {
		x := ev("w1", 0, "", "")
		x.Kind, x.Detail = kind, `{"kind":"`+kind+`"}`
		return x
	}
	// Two journal writes: a, then b and c (linked together; a driver may
	// journal a write's events of a workflow as one entry, linked whole).
	e.write(func(tx tgdriver.Tx) error { return tx.JournalEvents(e.ctx, []tgdriver.EventRow{body("a")}) })
	links := journaled(e, "w1", []tgdriver.EventRow{body("b"), body("c")}, "w1-1", 1)
	e.write(func(tx tgdriver.Tx) error {
		if ok, err := tx.LockWorkflow(e.ctx, "w1"); !ok || err != nil {
			return fmt.Errorf("LockWorkflow: %v %v", ok, err)
		}
		return tx.LinkJournaled(e.ctx, links[:1])
	})
	e.write(func(tx tgdriver.Tx) error {
		if _, err := tx.LockWorkflow(e.ctx, "w1"); err != nil {
			return err
		}
		return tx.LinkJournaled(e.ctx, links[1:])
	})
	e.eachReads(func(r tgdriver.Reads) error {
		if w, err := r.Workflow(e.ctx, "w1"); err != nil || w.EventCount != 4 || w.HeadHash != "w1-4" {
			return fmt.Errorf("Workflow(w1) = %+v, %v; want head w1-4 at 4", w, err)
		}
		all, err := events(e, r, "w1")
		if err != nil || len(all) != 4 {
			return fmt.Errorf("WorkflowEvents(w1) = %d events, %v; want 4", len(all), err)
		}
		for i, l := range links {
			want := l
			if d := sameEvent(all[i+1], want); d != "" {
				return fmt.Errorf("linked event %d: %s", i+2, d)
			}
		}
		if wfs, err := r.JournaledWorkflows(e.ctx, 10); err != nil || !eq(wfs, []string{"w2"}) {
			return fmt.Errorf("JournaledWorkflows = %v, %v; want [w2] (w1's entries moved, w2's kept)", wfs, err)
		}
		if n, err := r.EventCount(e.ctx); err != nil || n != 4 {
			return fmt.Errorf("EventCount = %d, %v; want 4", n, err)
		}
		// Every body is linked (w1's, appended or linked in two parts) or
		// journaled (w2's).
		if wf, id, ok, err := r.UnheldEvent(e.ctx); ok || err != nil {
			return fmt.Errorf("UnheldEvent = %q %d %v %v, want none", wf, id, ok, err)
		}
		return nil
	})
	e.write(func(tx tgdriver.Tx) error {
		if left, err := tx.JournaledEvents(e.ctx, []string{"w1"}, 10); err != nil || len(left) != 0 {
			t.Errorf("JournaledEvents(w1) after linking = %+v, %v", left, err)
		}
		return nil
	})
}

// testLinkMany: LockChains returns the rows (with their chain heads) of the
// workflows that exist, in workflow id order; one LinkJournaled links the
// journal of several workflows, interleaved in journal order, as the
// linker does, and fails as a whole when one head moved.
func testLinkMany(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.insert(task("c", "a"), task("a", "a"), task("b", "a"))
	e.write(func(tx tgdriver.Tx) error { return tx.AppendEvents(e.ctx, chain("a", 1, 1)) })
	e.write(func(tx tgdriver.Tx) error {
		return tx.JournalEvents(e.ctx, []tgdriver.EventRow{ev("a", 0, "", ""), ev("c", 0, "", ""), ev("b", 0, "", ""),
			ev("a", 0, "", ""), ev("c", 0, "", "")})
	})
	// link reads the heads and the journal of wfs and links them all (the
	// linker's transaction); moved, when set, links b to a head it does not
	// have.
	link := func(wfs []string, moved bool) error {
		return e.d.Write(e.ctx, func(tx tgdriver.Tx) error {
			heads, err := tx.LockChains(e.ctx, wfs)
			if err != nil {
				return err
			}
			head, count := map[string]string{}, map[string]int64{}
			for _, w := range heads {
				head[w.WorkflowID], count[w.WorkflowID] = w.HeadHash, w.EventCount
			}
			evs, err := tx.JournaledEvents(e.ctx, wfs, 100)
			if err != nil {
				return err
			}
			for i := range evs {
				wf := evs[i].WorkflowID
				count[wf]++
				evs[i].Seq, evs[i].PrevHash, evs[i].Hash = count[wf], head[wf], wf+"-"+strconv.FormatInt(count[wf], 10)
				head[wf] = evs[i].Hash
			}
			for i := range evs {
				if moved && evs[i].WorkflowID == "b" {
					evs[i].PrevHash = "stale" // b's head moved: its compare and set fails
				}
			}
			return tx.LinkJournaled(e.ctx, evs)
		})
	}
	e.write(func(tx tgdriver.Tx) error {
		got, err := tx.LockChains(e.ctx, []string{"c", "none", "a", "a"})
		if err != nil {
			return err
		}
		want := []tgdriver.WorkflowRow{
			{WorkflowID: "a", TaskCount: 1, EventCount: 1, HeadHash: "a-1", CreatedAtMS: 1000, UpdatedAtMS: 3001},
			{WorkflowID: "c", TaskCount: 1, CreatedAtMS: 1000, UpdatedAtMS: 1000},
		}
		if !eq(got, want) {
			t.Errorf("LockChains([c none a a]) = %+v, want %+v (those that exist, in workflow id order)", got, want)
		}
		if none, err := tx.LockChains(e.ctx, nil); err != nil || len(none) != 0 {
			t.Errorf("LockChains(nil) = %+v, %v", none, err)
		}
		return nil
	})
	before := e.dump()
	if err := link([]string{"a", "b", "c"}, true); !errors.Is(err, tgdriver.ErrChainMoved) {
		t.Fatalf("linking three workflows, one link stale: %v, want ErrChainMoved", err)
	}
	e.unchanged(before, "a LinkJournaled of several workflows that met a moved head")
	if err := link([]string{"c", "a", "b"}, false); err != nil {
		t.Fatalf("linking three workflows: %v", err)
	}
	e.eachReads(func(r tgdriver.Reads) error {
		for wf, n := range map[string]int64{"a": 3, "b": 1, "c": 2} {
			w, err := r.Workflow(e.ctx, wf)
			if err != nil || w.EventCount != n || w.HeadHash != wf+"-"+strconv.FormatInt(n, 10) {
				return fmt.Errorf("Workflow(%s) = %+v, %v; want %d events", wf, w, err, n)
			}
			all, err := events(e, r, wf)
			if err != nil || int64(len(all)) != n {
				return fmt.Errorf("WorkflowEvents(%s) = %d events, %v; want %d", wf, len(all), err, n)
			}
			for i, x := range all {
				if x.Seq != int64(i+1) || x.Hash != wf+"-"+strconv.FormatInt(x.Seq, 10) {
					return fmt.Errorf("WorkflowEvents(%s)[%d] = seq %d hash %q", wf, i, x.Seq, x.Hash)
				}
			}
		}
		if wfs, err := r.JournaledWorkflows(e.ctx, 10); err != nil || len(wfs) != 0 {
			return fmt.Errorf("JournaledWorkflows after linking every one = %v, %v", wfs, err)
		}
		return nil
	})
}

// testLinkErrors: LinkJournaled fails with ErrChainMoved when the head
// moved (or the links do not run consecutively) and with ErrNoRows when an
// entry is no longer in the workflow's journal; the caller's rollback
// leaves nothing.
func testLinkErrors(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.insert(task("w1", "a"), task("w2", "a"))
	e.write(func(tx tgdriver.Tx) error { return tx.AppendEvents(e.ctx, chain("w1", 1, 1)) })
	other := journaled(e, "w2", []tgdriver.EventRow{ev("w2", 0, "", "")}, "", 0)
	links := journaled(e, "w1", []tgdriver.EventRow{ev("w1", 0, "", ""), ev("w1", 0, "", "")}, "w1-1", 1)
	before := e.dump()
	moved := append([]tgdriver.EventRow(nil), links...)
	moved[0].PrevHash = "stale"
	gap := append([]tgdriver.EventRow(nil), links...)
	gap[1].Seq = 9
	gone := append([]tgdriver.EventRow(nil), links...)
	gone[1].EventID = 999999
	foreign := append([]tgdriver.EventRow(nil), links...)
	foreign[1].EventID = other[0].EventID
	for _, c := range []struct {
		name string
		evs  []tgdriver.EventRow
		want error
	}{
		{"a moved head", moved, tgdriver.ErrChainMoved},
		{"links not consecutive", gap, tgdriver.ErrChainMoved},
		{"an entry not in the journal", gone, tgdriver.ErrNoRows},
		{"another workflow's entry", foreign, tgdriver.ErrNoRows},
	} {
		err := e.d.Write(e.ctx, func(tx tgdriver.Tx) error {
			if _, err := tx.LockWorkflow(e.ctx, "w1"); err != nil {
				return err
			}
			return tx.LinkJournaled(e.ctx, c.evs)
		})
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	e.unchanged(before, "LinkJournaled that failed")
	// Linking an entry twice: the second finds it gone.
	e.write(func(tx tgdriver.Tx) error { return tx.LinkJournaled(e.ctx, links) })
	err := e.d.Write(e.ctx, func(tx tgdriver.Tx) error {
		again := links[1]
		again.Seq, again.PrevHash, again.Hash = 4, "w1-3", "w1-4"
		return tx.LinkJournaled(e.ctx, []tgdriver.EventRow{again})
	})
	if !errors.Is(err, tgdriver.ErrNoRows) {
		t.Errorf("linking an entry twice: %v, want ErrNoRows", err)
	}
}

// testApplyEvents: Apply records its events after its updates, linked (as
// AppendEvents, after linking them with Link when it is set) or journaled
// (as JournalEvents) by Journal.
func testApplyEvents(t *testing.T, h Harness) {
	e := newEnv(t, h)
	a := e.inserted(task("wf", "a"))[0]
	e.write(func(tx tgdriver.Tx) error {
		if err := tx.Apply(e.ctx, tgdriver.Apply{Updates: []tgdriver.TaskUpdate{{Seq: a.Seq, Set: hit}}, Events: chain("wf", 1, 2)}); err != nil {
			return err
		}
		r, err := tx.TaskBySeq(e.ctx, a.Seq)
		if err == nil && r.StatusMessage != "hit" {
			err = fmt.Errorf("the task after Apply: %+v", r)
		}
		return err
	})
	e.write(func(tx tgdriver.Tx) error {
		err := tx.Apply(e.ctx, tgdriver.Apply{Events: []tgdriver.EventRow{ev("wf", 0, "", ""), ev("wf", 0, "", "")}, Journal: true})
		return err
	})
	w, err := e.d.Reads().Workflow(e.ctx, "wf")
	if err != nil || w.EventCount != 2 || w.HeadHash != "wf-2" {
		t.Fatalf("Workflow after Apply = %+v, %v; want the linked events' head wf-2 at 2", w, err)
	}
	all, err := events(e, e.d.Reads(), "wf")
	if err != nil || len(all) != 4 || all[1].Seq != 2 || all[2].Seq != 0 || all[3].Seq != 0 {
		t.Fatalf("events after Apply = %+v, %v; want 2 linked, then 2 journaled", all, err)
	}
	if wfs, err := e.d.Reads().JournaledWorkflows(e.ctx, 10); err != nil || !eq(wfs, []string{"wf"}) {
		t.Fatalf("JournaledWorkflows = %v, %v", wfs, err)
	}
	// With Link, the events come unlinked and the driver links them onto
	// the head as it stands in the transaction (the journaled entries are
	// not part of it), calling Link in order.
	var calls []string
	link := func(ev *tgdriver.EventRow, prev string, seq int64) {
		calls = append(calls, fmt.Sprintf("%s@%d", prev, seq))
		ev.Seq, ev.PrevHash, ev.Hash = seq, prev, "wf-"+strconv.FormatInt(seq, 10)
	}
	e.write(func(tx tgdriver.Tx) error {
		calls = nil
		err := tx.Apply(e.ctx, tgdriver.Apply{Events: []tgdriver.EventRow{ev("wf", 0, "", ""), ev("wf", 0, "", "")}, Link: link})
		return err
	})
	if got := strings.Join(calls, " "); got != "wf-2@3 wf-3@4" {
		t.Errorf("Link was called with %s, want wf-2@3 wf-3@4", got)
	}
	w, err = e.d.Reads().Workflow(e.ctx, "wf")
	if err != nil || w.EventCount != 4 || w.HeadHash != "wf-4" {
		t.Fatalf("Workflow after Apply with Link = %+v, %v; want head wf-4 at 4", w, err)
	}
	all, err = events(e, e.d.Reads(), "wf")
	if err != nil || len(all) != 6 || all[2].Seq != 3 || all[2].PrevHash != "wf-2" || all[3].Seq != 4 || all[3].Hash != "wf-4" {
		t.Fatalf("events after Apply with Link = %+v, %v; want 4 linked, then 2 journaled", all, err)
	}
}

// testAudit: LockAuditHead, AppendAudit's compare and set, AuditHead,
// AuditEntries.
func testAudit(t *testing.T, h Harness) {
	e := newEnv(t, h)
	noHead := func(r tgdriver.Reads) error {
		if n, head, ok, err := r.AuditHead(e.ctx); n != 0 || head != "" || ok || err != nil {
			return fmt.Errorf("AuditHead before the first entry = %d %q %v %v", n, head, ok, err)
		}
		calls := 0
		if err := r.AuditEntries(e.ctx, func(tgdriver.AuditRow) error { calls++; return nil }); err != nil || calls != 0 {
			return fmt.Errorf("AuditEntries of an empty chain: %d, %v", calls, err)
		}
		return nil
	}
	e.eachReads(noHead)
	e.write(func(tx tgdriver.Tx) error {
		n, head, err := tx.LockAuditHead(e.ctx)
		if n != 0 || head != "" || err != nil {
			t.Errorf("LockAuditHead of an empty chain = %d %q %v", n, head, err)
		}
		return err
	})
	e.eachReads(noHead) // a head with no entry is still no head
	a1 := tgdriver.AuditRow{Seq: 1, Kind: "create", WorkflowID: "w1", AtMS: 10, Detail: `{"a":1}`, PrevHash: "", Hash: "a1"}
	a2 := tgdriver.AuditRow{Seq: 2, Kind: "hash_v2", AtMS: 20, Detail: `{}`, PrevHash: "a1", Hash: "a2"}
	e.write(func(tx tgdriver.Tx) error {
		if _, _, err := tx.LockAuditHead(e.ctx); err != nil {
			return err
		}
		if err := tx.AppendAudit(e.ctx, a1); err != nil {
			return err
		}
		if n, head, err := tx.LockAuditHead(e.ctx); n != 1 || head != "a1" || err != nil {
			t.Errorf("LockAuditHead after an append = %d %q %v", n, head, err)
		}
		return tx.AppendAudit(e.ctx, a2)
	})
	e.eachReads(func(r tgdriver.Reads) error {
		if n, head, ok, err := r.AuditHead(e.ctx); n != 2 || head != "a2" || !ok || err != nil {
			return fmt.Errorf("AuditHead = %d %q %v %v, want 2 a2", n, head, ok, err)
		}
		var got []tgdriver.AuditRow
		if err := r.AuditEntries(e.ctx, func(a tgdriver.AuditRow) error { got = append(got, a); return nil }); err != nil {
			return err
		}
		if len(got) != 2 || got[0] != a1 || got[1] != a2 {
			return fmt.Errorf("AuditEntries = %+v, want %+v %+v", got, a1, a2)
		}
		stop, calls := errors.New("stop"), 0
		if err := r.AuditEntries(e.ctx, func(tgdriver.AuditRow) error { calls++; return stop }); !errors.Is(err, stop) || calls != 1 {
			return fmt.Errorf("AuditEntries with a failing fn: %v after %d calls", err, calls)
		}
		return nil
	})
	before := e.dump()
	for name, a := range map[string]tgdriver.AuditRow{
		"a stale head":  {Seq: 2, Kind: "k", Detail: `{}`, PrevHash: "a1", Hash: "x"},
		"a wrong link":  {Seq: 3, Kind: "k", Detail: `{}`, PrevHash: "a1", Hash: "x"},
		"a gap":         {Seq: 4, Kind: "k", Detail: `{}`, PrevHash: "a2", Hash: "x"},
		"an empty link": {Seq: 1, Kind: "k", Detail: `{}`, PrevHash: "", Hash: "x"},
	} {
		err := e.d.Write(e.ctx, func(tx tgdriver.Tx) error {
			if _, _, err := tx.LockAuditHead(e.ctx); err != nil {
				return err
			}
			return tx.AppendAudit(e.ctx, a)
		})
		if !errors.Is(err, tgdriver.ErrChainMoved) {
			t.Errorf("AppendAudit with %s: %v, want ErrChainMoved", name, err)
		}
	}
	e.unchanged(before, "AppendAudit that met a moved head")
}

// testEventTaskSeq: an event is kept under its task's seq whether the
// writer gives it (EventRow.TaskSeq) or the driver finds it by the task's
// id, appended linked, journaled, or recorded by Apply either way: the
// task's history (TaskEvents) reads each (the linked in chain order, then
// the journaled), and no other task's does.
func testEventTaskSeq(t *testing.T, h Harness) {
	e := newEnv(t, h)
	seqs := e.insert(task("w1", "a"), task("w1", "b"))
	of := func(x tgdriver.EventRow, kind, taskID string, seq int64) tgdriver.EventRow {
		x.Kind, x.TaskID, x.TaskSeq = kind, taskID, seq
		return x
	}
	linked := chain("w1", 1, 2)
	linked[0], linked[1] = of(linked[0], "a-given", "w1.a", seqs[0]), of(linked[1], "b-found", "w1.b", 0)
	e.write(func(tx tgdriver.Tx) error { return tx.AppendEvents(e.ctx, linked) })
	j := ev("w1", 0, "", "")
	e.write(func(tx tgdriver.Tx) error {
		return tx.JournalEvents(e.ctx, []tgdriver.EventRow{of(j, "b-journal-given", "w1.b", seqs[1]), of(j, "a-journal-found", "w1.a", 0)})
	})
	e.write(func(tx tgdriver.Tx) error {
		err := tx.Apply(e.ctx, tgdriver.Apply{Events: []tgdriver.EventRow{of(j, "a-apply-given", "w1.a", seqs[0]), of(j, "b-apply-found", "w1.b", 0)},
			Journal: true})
		return err
	})
	link := func(ev *tgdriver.EventRow, prev string, seq int64) {
		ev.Seq, ev.PrevHash, ev.Hash = seq, prev, "w1-"+strconv.FormatInt(seq, 10)
	}
	e.write(func(tx tgdriver.Tx) error {
		err := tx.Apply(e.ctx, tgdriver.Apply{Events: []tgdriver.EventRow{of(j, "b-link-given", "w1.b", seqs[1]), of(j, "a-link-found", "w1.a", 0)},
			Link: link})
		return err
	})
	e.eachReads(func(r tgdriver.Reads) error {
		for taskID, want := range map[string]string{
			// The linked ones first, in chain order, then the journaled.
			"w1.a": "a-given a-link-found a-journal-found a-apply-given",
			"w1.b": "b-found b-link-given b-journal-given b-apply-found",
		} {
			te, err := r.TaskEvents(e.ctx, taskID)
			if err != nil {
				return err
			}
			var kinds []string
			for _, x := range te {
				kinds = append(kinds, x.Kind)
			}
			if got := strings.Join(kinds, " "); got != want {
				return fmt.Errorf("TaskEvents(%s): %s, want %s", taskID, got, want)
			}
		}
		return nil
	})
}
