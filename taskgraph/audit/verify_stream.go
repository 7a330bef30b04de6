package audit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/jcs"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/limits"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// How Verify reads and checks the workflows: one goroutine reads
// (the snapshot's queries, one for the events and one for the tasks of each
// workflow, in workflow order) and hands the rows in bounded batches to a
// second that checks them (hashes, links, replayed task state), so that
// reading and hashing use two cores. The checker sees every row in the
// order a sequential walk would and stops at the same first broken item;
// the reader is at most verifyQueue batches ahead of it, so memory stays
// bounded whatever the database's size (plus one workflow's task trails).

// verifyBatchRows bounds the rows of one batch.
const verifyBatchRows = 256

// verifyQueue bounds the batches read but not yet checked.
const verifyQueue = 8

// verifyEnd says what a batch ends.
type verifyEnd uint8

const (
	moreRows  verifyEnd = iota
	eventsEnd           // the last batch of its workflow's events
	tasksEnd            // the last batch of its workflow's tasks
)

// verifyBatch is rows of workflow heads[wf], events or tasks.
type verifyBatch struct {
	wf     int
	events []tgdriver.EventRow
	tasks  []tgdriver.TaskStateRow
	end    verifyEnd
}

// taskTrail is what a task's events say about it.
type taskTrail struct {
	v1       bool
	state    string // the state its last v2 event leaves; "" when none
	stateSeq int64
	payload  string // the payload digest of its v2 create event
	payloSeq int64
	made     *createDetail // what its create event recorded; nil when none
	madeSeq  int64
}

// createDetail is what a create event's detail records of the columns
// fixed at creation. Priority, requires and retry_delay_ms are recorded
// only when not the default (0, none, DefaultRetryDelay), in every hash
// version: before they existed every task had the default. MaxAttempts is
// nil when the event does not record it. The lists stay raw: the detail is
// canonical JSON, and for identifiers (all node ids and tags are) it is the
// text the row stores, so they compare without decoding.
type createDetail struct {
	NodeID       string
	DependsOn    string // raw JSON; "" when absent
	MaxAttempts  *int
	Priority     int
	Requires     string // raw JSON; "" when absent
	RetryDelayMS *int64
	// Kind is "gate" for a gate ("" when absent: a task), GateTimeoutMS and
	// OnTimeout its timeout (recorded only when set).
	Kind          string
	GateTimeoutMS int64
	OnTimeout     string
}

// parseCreateDetail reads a create event's detail. The compact text the
// store writes (every format-2 detail, canonical as its hash check found)
// is read in one pass; anything else goes through encoding/json.
func parseCreateDetail(detail string) (*createDetail, error) {
	if d, ok := parseCreateDetailCanonical(detail); ok {
		return d, nil
	}
	return parseCreateDetailJSON(detail)
}

// parseCreateDetailJSON reads a create event's detail with encoding/json.
func parseCreateDetailJSON(detail string) (*createDetail, error) {
	var v struct {
		NodeID       string          `json:"node_id"`
		DependsOn    json.RawMessage `json:"depends_on"`
		MaxAttempts  *int            `json:"max_attempts"`
		Priority     int             `json:"priority"`
		Requires     json.RawMessage `json:"requires"`
		RetryDelayMS *int64          `json:"retry_delay_ms"`
		Kind         string          `json:"kind"`
		GateTimeout  int64           `json:"gate_timeout_ms"`
		OnTimeout    string          `json:"on_timeout"`
	}
	if err := json.Unmarshal([]byte(detail), &v); err != nil {
		return nil, err
	}
	return &createDetail{NodeID: v.NodeID, DependsOn: string(v.DependsOn), MaxAttempts: v.MaxAttempts, Priority: v.Priority,
		Requires: string(v.Requires), RetryDelayMS: v.RetryDelayMS, Kind: v.Kind, GateTimeoutMS: v.GateTimeout, OnTimeout: v.OnTimeout}, nil
}

// parseCreateDetailCanonical reads detail when it is an object in the
// compact form the store writes (no white space, the string escapes of
// RFC 8785), whose node_id has no escapes and whose numbers are integers;
// ok is false otherwise. Members are read in any order, a repeated one as
// its last, as encoding/json does.
func parseCreateDetailCanonical(detail string) (d *createDetail, ok bool) {
	d = &createDetail{}
	if !jcs.CompactMembers(detail, func(key, raw string) bool {
		var err error
		switch key {
		case "node_id":
			if len(raw) < 2 || raw[0] != '"' || strings.ContainsAny(raw[1:len(raw)-1], `"\`) {
				return false
			}
			d.NodeID = raw[1 : len(raw)-1]
		case "depends_on":
			d.DependsOn = raw
		case "requires":
			d.Requires = raw
		case "max_attempts":
			n, e := strconv.Atoi(raw)
			d.MaxAttempts, err = &n, e
		case "priority":
			d.Priority, err = strconv.Atoi(raw)
		case "retry_delay_ms":
			n, e := strconv.ParseInt(raw, 10, 64)
			d.RetryDelayMS, err = &n, e
		case "kind", "on_timeout":
			if len(raw) < 2 || raw[0] != '"' || strings.ContainsAny(raw[1:len(raw)-1], `"\`) {
				return false
			}
			if key == "kind" {
				d.Kind = raw[1 : len(raw)-1]
			} else {
				d.OnTimeout = raw[1 : len(raw)-1]
			}
		case "gate_timeout_ms":
			d.GateTimeoutMS, err = strconv.ParseInt(raw, 10, 64)
		}
		return err == nil
	}) {
		return nil, false
	}
	return d, true
}

// emptyList reports whether raw is an absent, null or empty JSON list.
func emptyList(raw string) bool {
	return raw == "" || raw == "null" || raw == "[]"
}

// differs names the first column fixed at creation in which tr differs from
// what d records, with the stored and the recorded value; ok is false when
// none does.
func (d *createDetail) differs(tr *tgdriver.TaskStateRow) (column, stored, recorded string, ok bool) {
	retry := limits.DefaultRetryDelay.Milliseconds()
	if d.RetryDelayMS != nil {
		retry = *d.RetryDelayMS
	}
	switch {
	case tr.NodeID != d.NodeID:
		return "node_id", strconv.Quote(tr.NodeID), strconv.Quote(d.NodeID), true
	case emptyList(d.DependsOn) && tr.DependsOn != "[]", !emptyList(d.DependsOn) && tr.DependsOn != d.DependsOn:
		deps := d.DependsOn
		if emptyList(d.DependsOn) {
			deps = "[]"
		}
		return "depends_on", tr.DependsOn, deps, true
	case d.MaxAttempts != nil && tr.MaxAttempts != *d.MaxAttempts:
		return "max_attempts", strconv.Itoa(tr.MaxAttempts), strconv.Itoa(*d.MaxAttempts), true
	case tr.Priority != d.Priority:
		return "priority", strconv.Itoa(tr.Priority), strconv.Itoa(d.Priority), true
	case !requiresMatch(tr.Requires, d.Requires):
		var tags []string
		_ = json.Unmarshal([]byte(d.Requires), &tags) // for the message only; a list that does not decode shows as none
		return "requires", strconv.Quote(tr.Requires), strconv.Quote(strings.Join(tags, " ")), true
	case tr.RetryDelayMS != retry:
		return "retry_delay_ms", strconv.FormatInt(tr.RetryDelayMS, 10), strconv.FormatInt(retry, 10), true
	case tgdriver.KindOf(tr.Kind) != tgdriver.KindOf(d.Kind):
		return "kind", strconv.Quote(tgdriver.KindOf(tr.Kind)), strconv.Quote(tgdriver.KindOf(d.Kind)), true
	case tr.GateTimeoutMS != d.GateTimeoutMS:
		return "gate_timeout_ms", strconv.FormatInt(tr.GateTimeoutMS, 10), strconv.FormatInt(d.GateTimeoutMS, 10), true
	case tr.GateOnTimeout != d.OnTimeout:
		return "gate_on_timeout", strconv.Quote(tr.GateOnTimeout), strconv.Quote(d.OnTimeout), true
	}
	return "", "", "", false
}

// requiresMatch reports whether the stored canonical requires (tags joined
// by one space) are the list raw records.
func requiresMatch(stored string, raw string) bool {
	if stored == "" {
		return emptyList(raw)
	}
	return raw == `["`+strings.ReplaceAll(stored, " ", `","`)+`"]`
}

// verifyWorkflows checks every workflow's chain and tasks, returning the
// first broken item, or the first read error when nothing was broken
// before it.
func verifyWorkflows(ctx context.Context, rd tgdriver.Reads, heads []tgdriver.WorkflowRow, rep *VerifyReport) (*BrokenLink, error) {
	batches := make(chan *verifyBatch, verifyQueue)
	free := make(chan *verifyBatch, verifyQueue+2)
	quit := make(chan struct{})
	var broken *BrokenLink
	checked := make(chan struct{})
	go func() {
		defer close(checked)
		c := chainChecker{heads: heads, rep: rep, wf: -1, trails: map[string]taskTrail{}}
		for b := range batches {
			if broken = c.batch(b); broken != nil {
				close(quit)
				return
			}
			select {
			case free <- b:
			default:
			}
		}
	}()
	err := readWorkflows(ctx, rd, heads, batches, free, quit)
	close(batches)
	<-checked
	if broken != nil {
		return broken, nil
	}
	if errors.Is(err, errStop) {
		err = nil
	}
	return nil, err
}

// readWorkflows sends the events then the tasks of each workflow of heads
// in order, until done or quit is closed.
func readWorkflows(ctx context.Context, rd tgdriver.Reads, heads []tgdriver.WorkflowRow, out chan<- *verifyBatch, free <-chan *verifyBatch, quit <-chan struct{}) error {
	get := func(wf int) *verifyBatch {
		select {
		case b := <-free:
			b.wf, b.events, b.tasks, b.end = wf, b.events[:0], b.tasks[:0], moreRows
			return b
		default:
			return &verifyBatch{wf: wf}
		}
	}
	send := func(b *verifyBatch) error {
		select {
		case out <- b:
			return nil
		case <-quit:
			return errStop
		}
	}
	for i, h := range heads {
		next := func() *verifyBatch { return get(i) }
		b, err := batchRows(next(), eventsOf, func(fn func(tgdriver.EventRow) error) error {
			return rd.WorkflowEvents(ctx, h.WorkflowID, fn)
		}, next, send)
		if err != nil {
			return err
		}
		b.end = eventsEnd
		if err := send(b); err != nil {
			return err
		}
		b, err = batchRows(next(), tasksOf, func(fn func(tgdriver.TaskStateRow) error) error {
			return rd.WorkflowTaskStates(ctx, h.WorkflowID, fn)
		}, next, send)
		if err != nil {
			return err
		}
		b.end = tasksEnd
		if err := send(b); err != nil {
			return err
		}
	}
	return nil
}

func eventsOf(b *verifyBatch) *[]tgdriver.EventRow    { return &b.events }
func tasksOf(b *verifyBatch) *[]tgdriver.TaskStateRow { return &b.tasks }

// batchRows puts the rows stream reads into b's rows (rowsOf), sending
// each batch that fills up to verifyBatchRows and going on in a new one
// (next); it returns the last batch, not sent.
func batchRows[T any](b *verifyBatch, rowsOf func(*verifyBatch) *[]T, stream func(func(T) error) error,
	next func() *verifyBatch, send func(*verifyBatch) error) (*verifyBatch, error) {
	err := stream(func(r T) error {
		rows := rowsOf(b)
		if *rows == nil {
			*rows = make([]T, 0, verifyBatchRows)
		}
		*rows = append(*rows, r)
		if len(*rows) < verifyBatchRows {
			return nil
		}
		if err := send(b); err != nil {
			return err
		}
		b = next()
		return nil
	})
	return b, err
}

// chainChecker checks the batches of one workflow after another.
type chainChecker struct {
	heads  []tgdriver.WorkflowRow
	rep    *VerifyReport
	wf     int    // the workflow being checked, an index in heads
	prev   string // the hash of its last event checked
	n      int64  // its events checked
	trails map[string]taskTrail
	buf    []byte // the v2 object being hashed
}

func (c *chainChecker) batch(b *verifyBatch) *BrokenLink {
	if b.wf != c.wf {
		c.wf, c.prev, c.n = b.wf, "", 0
		clear(c.trails)
		c.rep.Workflows++
	}
	h := c.heads[c.wf]
	for i := range b.events {
		if broken := c.event(&b.events[i]); broken != nil {
			return broken
		}
	}
	for i := range b.tasks {
		if broken := c.task(&b.tasks[i]); broken != nil {
			return broken
		}
	}
	switch b.end {
	case eventsEnd:
		if c.n != h.EventCount || c.prev != h.HeadHash {
			return &BrokenLink{WorkflowID: h.WorkflowID, Reason: fmt.Sprintf("the chain has %d events ending in %q but the workflow's head records %d ending in %q (events were removed or added)", c.n, c.prev, h.EventCount, h.HeadHash)}
		}
	case tasksEnd:
		if len(c.trails) > 0 {
			ids := make([]string, 0, len(c.trails))
			for id := range c.trails {
				ids = append(ids, id)
			}
			sort.Strings(ids)
			return &BrokenLink{WorkflowID: h.WorkflowID, TaskID: ids[0], Reason: fmt.Sprintf("events name task %s, which is not stored (the task row was deleted)", ids[0])}
		}
	}
	return nil
}

// event checks the next event of the workflow's chain.
func (c *chainChecker) event(e *tgdriver.EventRow) *BrokenLink {
	workflowID := c.heads[c.wf].WorkflowID
	c.n++
	c.rep.Events++
	stop := func(reason string, args ...any) *BrokenLink {
		return &BrokenLink{WorkflowID: workflowID, Seq: e.Seq, EventID: e.EventID, Reason: fmt.Sprintf(reason, args...)}
	}
	if e.Seq != c.n {
		return stop("sequence %d found where %d was expected (an event is missing or was inserted)", e.Seq, c.n)
	}
	if e.PrevHash != c.prev {
		return stop("prev_hash does not match the hash of event %d", c.n-1)
	}
	match, err := c.hashMatches(e)
	if err != nil {
		return stop("content does not match its hash (the event was edited: %v)", err)
	}
	if !match {
		return stop("content does not match its hash (the event was edited)")
	}
	c.prev = e.Hash
	tt := c.trails[e.TaskID]
	if e.Kind == EventCreate {
		d, err := parseCreateDetail(e.Detail)
		if err != nil {
			return stop("create event's detail does not describe a task (%v)", err)
		}
		tt.made, tt.madeSeq = d, e.Seq
	}
	if e.HashVersion < HashV2 {
		c.rep.V1Events++
		tt.v1 = true
		c.trails[e.TaskID] = tt
		return nil
	}
	c.rep.V2Events++
	tt.state, tt.stateSeq = e.TaskState, e.Seq
	if e.Kind == EventCreate {
		// {"payload_sha256":"<hex>"}, canonical (checked with the hash).
		d, ok := strings.CutPrefix(e.Content, `{"payload_sha256":"`)
		d, ok2 := strings.CutSuffix(d, `"}`)
		if !ok || !ok2 || len(d) != 64 {
			return stop("create event has no payload digest")
		}
		tt.payload, tt.payloSeq = d, e.Seq
	}
	c.trails[e.TaskID] = tt
	return nil
}

// hashMatches reports whether e's stored hash is the hash of its content
// in its version; the error matches ErrNotCanonical when a v2 field is not
// canonical or the version is unknown. Format 2 is hashed here into one
// reused buffer (EventHash does the same in a new one).
func (c *chainChecker) hashMatches(e *tgdriver.EventRow) (bool, error) {
	if e.HashVersion != HashV2 {
		want, err := EventHash(e)
		return err == nil && want == e.Hash, err
	}
	if err := CheckCanonical(e.Detail, e.TaskState, e.Content); err != nil {
		return false, err
	}
	c.buf = appendEventObject(c.buf[:0], e)
	sum := sha256.Sum256(c.buf)
	var hx [64]byte
	hex.Encode(hx[:], sum[:])
	return string(hx[:]) == e.Hash, nil
}

// task checks a stored task against what its events say.
func (c *chainChecker) task(tr *tgdriver.TaskStateRow) *BrokenLink {
	workflowID := c.heads[c.wf].WorkflowID
	c.rep.Tasks++
	tt, ok := c.trails[tr.TaskID]
	if !ok {
		return &BrokenLink{WorkflowID: workflowID, TaskID: tr.TaskID, Reason: fmt.Sprintf("task %s has no events (its create event was removed, or the task was added behind the store's back)", tr.TaskID)}
	}
	delete(c.trails, tr.TaskID)
	if tt.state != "" {
		if got := TaskStateJSON(tr.State, tr.Owner, tr.Generation, tr.Attempts, tr.Result, tr.HasResult, tr.Error); string(got) != tt.state {
			return &BrokenLink{WorkflowID: workflowID, Seq: tt.stateSeq, TaskID: tr.TaskID,
				Reason: fmt.Sprintf("task %s: stored %s from what its last event %d left (changed without an event)", tr.TaskID, stateDiff(got, []byte(tt.state)), tt.stateSeq)}
		}
	} else if !tt.v1 {
		return &BrokenLink{WorkflowID: workflowID, TaskID: tr.TaskID, Reason: fmt.Sprintf("task %s has no events", tr.TaskID)}
	}
	if tt.made != nil {
		if col, stored, recorded, ok := tt.made.differs(tr); ok {
			return &BrokenLink{WorkflowID: workflowID, Seq: tt.madeSeq, TaskID: tr.TaskID,
				Reason: fmt.Sprintf("task %s: stored %s %s, but its create event %d recorded %s (changed without an event)", tr.TaskID, col, stored, tt.madeSeq, recorded)}
		}
	}
	if tt.payload != "" && Sha256Hex(tr.Payload) != tt.payload {
		return &BrokenLink{WorkflowID: workflowID, Seq: tt.payloSeq, TaskID: tr.TaskID,
			Reason: fmt.Sprintf("task %s: stored payload does not match the digest in its create event %d (the payload was edited)", tr.TaskID, tt.payloSeq)}
	}
	return nil
}
