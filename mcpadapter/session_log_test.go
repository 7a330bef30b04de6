package mcpadapter

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestStdioSessionLogsOncePerClient pins that one stdio client logs one
// "started" and one "ended" line naming both protocol eras, instead of the
// SDK's three lifecycle lines twice with identical text (one per era
// session); at debug level the SDK's lines are still there.
func TestStdioSessionLogsOncePerClient(t *testing.T) {
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for _, tc := range []struct {
		level   slog.Level
		sdkLine int // "server session connected" lines expected
	}{{slog.LevelInfo, 0}, {slog.LevelDebug, 2}} {
		var logs bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: tc.level}))
		f := newFixture(t, func(c *Config) { c.Logger = logger })
		msgs := serveLines(t, f.srv, initialize, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
		if len(msgs) != 2 {
			t.Fatalf("want 2 answers (initialize, tools/list), got %d", len(msgs))
		}
		out := logs.String()
		for msg, want := range map[string]int{
			`msg="stdio session started"`:    1,
			`msg="stdio session ended"`:      1,
			`msg="server session connected"`: tc.sdkLine,
			`msg="server connecting"`:        tc.sdkLine,
			`level=INFO msg="server session`: 0,
			`level=INFO msg="server connect`: 0,
		} {
			if got := strings.Count(out, msg); got != want {
				t.Errorf("level %v: %d lines with %s, want %d\n%s", tc.level, got, msg, want, out)
			}
		}
		if !strings.Contains(out, "2026-07-28") || !strings.Contains(out, "2025-11-25") {
			t.Errorf("the session lines do not name both eras:\n%s", out)
		}
	}
}
