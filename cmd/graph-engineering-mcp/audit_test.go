package main

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"
)

func TestAuditVerify(t *testing.T) {
	e := newEnv(t)
	e.fixture()
	r := e.cli("", "audit", "verify").want(t, exitOK)
	if r.stdout != "history verified: 2 workflow(s), 18 event(s), every hash chain intact\n" {
		t.Fatalf("stdout %q", r.stdout)
	}
	r = e.cli("", "audit", "verify", "--json").want(t, exitOK)
	var out struct {
		OK        bool
		Workflows int
		Events    int64
		Broken    any
	}
	decodeJSON(t, r.stdout, &out)
	if !out.OK || out.Workflows != 2 || out.Events != 18 || out.Broken != nil {
		t.Fatalf("JSON: %+v", out)
	}
}

// An event edited behind the store's back breaks the chain at that event.
func TestAuditVerifyCatchesEditedEvent(t *testing.T) {
	e := newEnv(t)
	f := e.fixture()
	evs, err := e.s.TaskEvents(e.ctx, f.tasks["lint"].TaskID)
	if err != nil {
		t.Fatal(err)
	}
	victim := evs[len(evs)-1] // the fail event
	db, err := sql.Open("sqlite3", "file:"+e.path+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	res, err := db.Exec(`UPDATE events SET detail = ? WHERE event_id = ?`, `{"attempt":1,"error":"all good","retryable":false}`, victim.EventID)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("updated %d rows", n)
	}
	db.Close()

	r := e.cli("", "audit", "verify").want(t, exitFailure)
	want := fmt.Sprintf("first broken link at workflow wf, event seq %d (event id %d): content does not match its hash (the event was edited)", victim.Seq, victim.EventID)
	if !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "event history does not verify") {
		t.Fatalf("stderr %q\nwant it to contain %q", r.stderr, want)
	}
	r = e.cli("", "audit", "verify", "--json").want(t, exitFailure)
	var out struct {
		OK     bool
		Broken struct {
			WorkflowID string `json:"workflow_id"`
			Seq        int64
			EventID    int64 `json:"event_id"`
			Reason     string
		}
	}
	decodeJSON(t, r.stdout, &out)
	if out.OK || out.Broken.WorkflowID != "wf" || out.Broken.Seq != victim.Seq || out.Broken.EventID != victim.EventID || !strings.Contains(out.Broken.Reason, "edited") {
		t.Fatalf("JSON: %+v", out)
	}
}
