package pause

import (
	"fmt"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// MaxListed bounds the workflow pauses one listing returns.
const MaxListed = 1000

// Pause is a pause of claiming in effect: of one workflow, or of every
// workflow when WorkflowID is "" (a deploy). While it holds, no claim is
// granted there, by claim-next or by id; leases granted before run on to
// their end (heartbeats, completions and failures are accepted as ever).
type Pause struct {
	WorkflowID string // "" when all claiming on the database is paused
	At         time.Time
	Reason     string
	Operator   string
}

// String says what is paused, since when, by whom and why, for a claim
// answer or a probe.
func (p Pause) String() string {
	what := "all claiming on this database is paused"
	if p.WorkflowID != "" {
		what = "workflow " + p.WorkflowID + " is paused"
	}
	return fmt.Sprintf("%s (since %s, by operator %s: %s); leases already granted run on, and claims resume when an operator resumes it",
		what, p.At.UTC().Format(time.RFC3339), p.Operator, p.Reason)
}

// Of is the pause a driver's row records.
func Of(r tgdriver.PauseRow) Pause {
	return Pause{WorkflowID: r.WorkflowID, At: time.UnixMilli(r.AtMS).UTC(), Reason: r.Reason, Operator: r.By}
}

// Scope names what a pause of workflowID holds, for messages.
func Scope(workflowID string) string {
	if workflowID == "" {
		return "all claiming"
	}
	return "workflow " + workflowID
}

// Holding is the pause, of rows (the pauses a driver read for workflowID:
// the pause of all claiming first, when there is one), that holds a
// claim-next of workflowID ("": any workflow): the pause of all claiming,
// else that workflow's; nil when none does. A claim-next of any workflow is
// held only by the pause of all claiming.
func Holding(rows []tgdriver.PauseRow, workflowID string) *Pause {
	if len(rows) == 0 || (rows[0].WorkflowID != "" && workflowID == "") {
		return nil
	}
	p := Of(rows[0])
	return &p
}
