package mcpadapter

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/wire"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/principal"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/tools"
)

// inboundRequest is a tools/call whose header carries key, as the HTTP
// front hands one to the SDK ("" for a request with no header: stdio).
func inboundRequest(key string) mcp.Request {
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "x"}}
	if key != "" {
		req.Extra = &mcp.RequestExtra{Header: http.Header{wire.HeaderInbound: {key}}}
	}
	return req
}

// The call gets what its transport stated: the admitted Inbound's arrival,
// principal, deadline and abort over HTTP, Config.Local over stdio; a call
// whose Inbound is gone is refused.
func TestInboundMiddlewareGivesEachCallItsInputs(t *testing.T) {
	ps, err := principal.ParseAuthFile([]byte(`{"principals": [{"name": "w", "token_sha256": "` + principal.TokenDigest("w-token-0123456789") + `", "roles": ["work"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	auth := principal.NewAuthenticator(ps)
	local, err := auth.Caller("w")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(c *Config) { c.Local = local })
	type seen struct {
		caller   tools.Caller
		deadline time.Time
	}
	calls := make(chan seen, 1)
	h := f.srv.inboundMiddleware(func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		dl, _ := ctx.Deadline()
		calls <- seen{callerOf(ctx), dl}
		if method == "tools/call" && req.(*mcp.CallToolRequest).Params.Name == "wait" {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return &mcp.CallToolResult{}, nil
	})

	// Over HTTP: the admitted record.
	arrived := f.clock.Now().Add(-time.Minute)
	abort, stop := context.WithCancel(context.Background())
	key, forget := f.srv.Admit(Inbound{Arrival: arrived, Caller: principal.Caller{}, Timeout: time.Hour, Abort: abort})
	if _, err := h(f.ctx, "tools/call", inboundRequest(key)); err != nil {
		t.Fatal(err)
	}
	got := <-calls
	if !got.caller.Arrival.Equal(arrived) || got.caller.Principal != nil {
		t.Fatalf("HTTP call got %+v, want the admitted arrival and no principal", got.caller)
	}
	if d := time.Until(got.deadline); d > time.Hour || d < 59*time.Minute {
		t.Fatalf("HTTP call deadline in %v, want about an hour", d)
	}
	// The abort (a shutdown that stopped waiting) cancels a running call.
	waiting := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "wait"}, Extra: &mcp.RequestExtra{Header: http.Header{wire.HeaderInbound: {key}}}}
	done := make(chan error, 1)
	go func() { _, err := h(f.ctx, "tools/call", waiting); done <- err }()
	<-calls
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("after abort: %v, want context.Canceled", err)
	}
	forget()

	// Gone: refused, never run as nobody or as everybody.
	_, err = h(f.ctx, "tools/call", inboundRequest(key))
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeInternalError || len(calls) != 0 {
		t.Fatalf("a call whose Inbound is gone: %v, want -32603 without running", err)
	}
	// A notification with a gone Inbound still passes (it acts for nobody).
	if _, err := h(f.ctx, "notifications/cancelled", inboundRequest(key)); err != nil {
		t.Fatal(err)
	}
	<-calls

	// Over stdio (no header): Config.Local, no deadline from here, and the
	// store stamps the arrival when it is called.
	if _, err := h(f.ctx, "tools/call", inboundRequest("")); err != nil {
		t.Fatal(err)
	}
	got = <-calls
	if got.caller.Principal == nil || got.caller.Principal.Name != "w" || !got.caller.Arrival.IsZero() || !got.deadline.IsZero() {
		t.Fatalf("stdio call got %+v (deadline %v), want principal w, no arrival, no deadline", got.caller, got.deadline)
	}
	// The principal is resolved at each call: a reload that removes it
	// leaves a principal with no roles.
	empty, err := principal.ParseAuthFile([]byte(`{"principals": []}`))
	if err != nil {
		t.Fatal(err)
	}
	auth.Replace(empty)
	if _, err := h(f.ctx, "tools/call", inboundRequest("")); err != nil {
		t.Fatal(err)
	}
	if got = <-calls; got.caller.Principal == nil || len(got.caller.Principal.Roles) != 0 {
		t.Fatalf("after the reload the call acts for %+v, want w with no roles", got.caller.Principal)
	}
}
