package taskgraph

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// holdWriter blocks the writer goroutine inside an operation until release
// is called, so that operations submitted meanwhile queue up and are taken
// as one batch.
func holdWriter(t *testing.T, b *bundle) (release func()) {
	t.Helper()
	entered, gate := make(chan struct{}), make(chan struct{})
	go func() {
		b.s.do(b.ctx, func(*wtx) error {
			close(entered)
			<-gate
			return nil
		})
	}()
	<-entered
	return func() { close(gate) }
}

// A failed COMMIT fails every operation of the batch, including those whose
// own work succeeded; none of them is committed, their after-commit hooks do
// not run, and the next batch commits normally.
func TestFailedCommitFailsWholeBatch(t *testing.T) {
	b := setup(t)
	var mu sync.Mutex
	var batches []error
	b.s.opts.OnBatch = func(n int, _ time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		if n == 3 {
			batches = append(batches, err)
		}
	}
	release := holdWriter(t, b)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	hookRan := false
	for i, fn := range []func() error{
		func() error { _, err := b.s.CreateTask(b.ctx, "wf", NodeSpec{NodeID: "before"}); return err },
		func() error {
			// Its statements succeed, but the deferred foreign key check
			// makes COMMIT fail.
			return b.s.do(b.ctx, func(w *wtx) error {
				if _, err := w.exec(`PRAGMA defer_foreign_keys = ON`); err != nil {
					return err
				}
				w.afterCommit(func() { hookRan = true })
				_, err := w.exec(`INSERT INTO edges (dep_seq, task_seq) VALUES (424242, 434343)`)
				return err
			})
		},
		func() error { _, err := b.s.CreateTask(b.ctx, "wf", NodeSpec{NodeID: "after"}); return err },
	} {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = fn() }()
		waitFor(t, func() bool { return len(b.s.ops) == i+1 })
	}
	release()
	wg.Wait()
	for i, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "commit") {
			t.Errorf("op %d: %v, want the commit failure", i, err)
		}
	}
	if hookRan {
		t.Error("an after-commit hook ran for a batch that did not commit")
	}
	mu.Lock()
	if len(batches) != 1 || batches[0] == nil {
		t.Errorf("OnBatch saw %v for the 3-operation batch, want one failure", batches)
	}
	mu.Unlock()
	if n := len(mustList(t, b)); n != 0 {
		t.Fatalf("%d tasks committed by a failed batch", n)
	}
	// The connection is usable again: the next batch commits.
	b.create(t, "wf", "later")
	if got := mustList(t, b); len(got) != 1 || got[0].NodeID != "later" {
		t.Fatalf("after the failed batch: %+v", got)
	}
	b.verify(t)
}

func mustList(t *testing.T, b *bundle) []Task {
	t.Helper()
	ts, err := b.s.ListTasks(b.ctx, ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// A statement that does not compile fails its operation only, and is not
// cached.
func TestBadStatementFailsOnlyItsOperation(t *testing.T) {
	b := setup(t)
	release := holdWriter(t, b)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, fn := range []func() error{
		func() error {
			return b.s.do(b.ctx, func(w *wtx) error {
				if err := w.queryRow(`SELECT nope FROM tasks`).Scan(new(int)); err == nil {
					return errors.New("a bad query returned a row")
				}
				_, err := w.exec(`UPDATE nowhere SET x = 1`)
				return err
			})
		},
		func() error { _, err := b.s.CreateTask(b.ctx, "wf", NodeSpec{NodeID: "ok"}); return err },
	} {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = fn() }()
		waitFor(t, func() bool { return len(b.s.ops) == i+1 })
	}
	release()
	wg.Wait()
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "no such table") {
		t.Errorf("bad statement: %v", errs[0])
	}
	if errs[1] != nil {
		t.Errorf("the other operation of the batch: %v", errs[1])
	}
	if len(mustList(t, b)) != 1 {
		t.Fatal("the good operation was not committed")
	}
}
