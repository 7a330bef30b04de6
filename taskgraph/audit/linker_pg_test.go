package audit_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/audit"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgpostgres/pgtest"
)

// TestLinkerTakesKickedBodiesAndReadsBackOthers: on PostgreSQL (a
// tgdriver.JournalIDReader), a linker takes the bodies of the events it was
// kicked with from those events and reads back only the others' (another
// process's); either way the chains it writes verify against the bodies the
// database holds, every event in its place.
func TestLinkerTakesKickedBodiesAndReadsBackOthers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)
	drv, err := tgpostgres.Open(ctx, url, tgpostgres.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO workflows (workflow_id, created_at_ms, updated_at_ms) VALUES ('w1', 1, 1), ('w2', 1, 1)`); err != nil {
		t.Fatal(err)
	}
	n := 0
	events := func(wfs ...string) []tgdriver.EventRow {
		var out []tgdriver.EventRow
		for _, wf := range wfs {
			n++
			out = append(out, tgdriver.EventRow{WorkflowID: wf, TaskID: fmt.Sprintf("%s.t%d", wf, n), Kind: "claim", Owner: "worker",
				Generation: 1, AtMS: int64(1000 + n), Detail: fmt.Sprintf(`{"n":%d}`, n), HashVersion: audit.HashV2,
				ActorKind: "worker", ActorName: "worker", TaskState: `{"state":"claimed"}`, Content: `{}`})
		}
		return out
	}
	journal := func(evs []tgdriver.EventRow) {
		t.Helper()
		if err := drv.Write(ctx, func(tx tgdriver.Tx) error {
			err := tx.Apply(ctx, tgdriver.Apply{Events: evs, Journal: true})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	l := audit.NewLinker(drv, slog.New(slog.NewTextHandler(io.Discard, nil)))
	mine := events("w1", "w2", "w1", "w1", "w2", "w1")
	journal(mine)
	l.Kick(mine)
	journal(events("w2", "w1", "w2", "w2")) // not kicked: another process's
	mine = events("w2", "w1")
	journal(mine)
	l.Kick(mine)
	if err := l.LinkAll(ctx); err != nil {
		t.Fatal(err)
	}
	if fromKicks, fromDatabase := l.BodySources(); fromKicks != 8 || fromDatabase != 4 {
		t.Errorf("bodies from kicks %d, read back %d; want 8 and 4", fromKicks, fromDatabase)
	}
	linked := 0
	for _, wf := range []string{"w1", "w2"} {
		prev, seq := "", int64(0)
		if err := drv.Reads().WorkflowEvents(ctx, wf, func(e tgdriver.EventRow) error {
			seq++
			want, err := audit.EventHash(&e)
			if err != nil {
				return err
			}
			if e.Seq != seq || e.PrevHash != prev || e.Hash != want {
				t.Errorf("%s event %d (%s): at %d after %.8s with hash %.8s; want at %d after %.8s with hash %.8s",
					wf, e.EventID, e.Detail, e.Seq, e.PrevHash, e.Hash, seq, prev, want)
			}
			prev = e.Hash
			linked++
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if linked != 12 {
		t.Errorf("%d events on the chains, want 12", linked)
	}
}
