package gate

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/rules"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

func TestCheckNodeNormalizesAndRefusesWhatAGateCannotHave(t *testing.T) {
	t.Parallel()
	kind, timeout, on, err := CheckNode(Node{})
	if err != nil || kind != tgdriver.KindTask || timeout != 0 || on != "" {
		t.Fatalf("CheckNode of a plain node = %q, %v, %q, %v; want a task", kind, timeout, on, err)
	}
	kind, timeout, on, err = CheckNode(Node{Kind: tgdriver.KindGate, Timeout: time.Minute, OnTimeout: OnTimeoutReject})
	if err != nil || kind != tgdriver.KindGate || timeout != time.Minute || on != OnTimeoutReject {
		t.Fatalf("CheckNode of a gate with a timeout = %q, %v, %q, %v", kind, timeout, on, err)
	}
	for _, c := range []struct {
		n     Node
		field string
	}{
		{Node{Timeout: time.Minute}, "gate_timeout_ms"},
		{Node{Kind: "job"}, "kind"},
		{Node{Kind: tgdriver.KindGate, HasRequires: true}, "requires"},
		{Node{Kind: tgdriver.KindGate, HasNotBefore: true}, "not_before"},
		{Node{Kind: tgdriver.KindGate, OnTimeout: OnTimeoutApprove}, "on_timeout"},
		{Node{Kind: tgdriver.KindGate, Timeout: time.Millisecond, OnTimeout: OnTimeoutApprove}, "gate_timeout_ms"},
		{Node{Kind: tgdriver.KindGate, Timeout: MaxTimeout + time.Millisecond, OnTimeout: OnTimeoutApprove}, "gate_timeout_ms"},
		{Node{Kind: tgdriver.KindGate, Timeout: time.Minute, OnTimeout: "maybe"}, "on_timeout"},
	} {
		_, _, _, err := CheckNode(c.n)
		var ve *rules.ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field || !errors.Is(err, rules.ErrInvalid) {
			t.Errorf("CheckNode(%+v) = %v; want an invalid %s", c.n, err, c.field)
		}
	}
}

func TestCheckDecisionNamesTheField(t *testing.T) {
	t.Parallel()
	if err := CheckDecision(Decision{By: "ana", Via: DecidedByOperator}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		d     Decision
		field string
	}{
		{Decision{Via: DecidedByOperator}, "decided_by"},
		{Decision{By: "ana", Via: DecidedByTimeout}, "via"},
		{Decision{By: "ana", Via: DecidedByPrincipal, Reason: "\xff"}, "reason"},
	} {
		var ve *rules.ValidationError
		if err := CheckDecision(c.d); !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("CheckDecision(%+v) = %v; want an invalid %s", c.d, err, c.field)
		}
	}
}

func TestRefusalSaysWhoDecided(t *testing.T) {
	t.Parallel()
	if _, s := Refusal(tgdriver.KindGate, true, "blocked", nil, "", "awaiting approval"); s != nil {
		t.Fatalf("a gate awaiting approval is refused: %v", s)
	}
	if _, s := Refusal(tgdriver.KindTask, false, "pending", nil, "", ""); s != ErrNotGate {
		t.Fatalf("a task is refused with %v, want ErrNotGate", s)
	}
	if _, s := Refusal(tgdriver.KindGate, false, "blocked", nil, "", "waiting for a"); s != ErrNotAwaiting {
		t.Fatalf("a blocked gate is refused with %v, want ErrNotAwaiting", s)
	}
	detail, s := Refusal(tgdriver.KindGate, false, "completed", []byte(`{"decision":"approved","decided_by":"ana","via":"operator","reason":"ok"}`), "", "")
	if s != ErrDecided || !strings.Contains(detail, "approved by ana (operator): ok") {
		t.Fatalf("a decided gate is refused with %v, %q", s, detail)
	}
	if detail, _ := Refusal(tgdriver.KindGate, false, "failed", nil, RejectedError("bo", DecidedByPrincipal, "no"), ""); !strings.Contains(detail, "rejected by bo (principal): no") {
		t.Fatalf("a rejected gate's refusal says %q", detail)
	}
}

func TestAwaitingStatusAndDueAgree(t *testing.T) {
	t.Parallel()
	if DueAt(0, 1000) != 0 || AwaitingStatus(0, "", 1000) != "awaiting approval" || len(AwaitDetail(0, "")) != 0 {
		t.Fatal("a gate without timeout has a decision time")
	}
	due := DueAt(time.Second, 1000)
	if due != 2000 {
		t.Fatalf("DueAt = %d, want 2000", due)
	}
	if st := AwaitingStatus(time.Second, OnTimeoutApprove, 1000); !strings.Contains(st, "approve at 1970-01-01T00:00:02Z") {
		t.Fatalf("AwaitingStatus = %q", st)
	}
	if d := AwaitDetail(due, OnTimeoutApprove); d["decide_by_ms"] != int64(2000) || d["on_timeout"] != OnTimeoutApprove {
		t.Fatalf("AwaitDetail = %v", d)
	}
}
