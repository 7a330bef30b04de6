package wire

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestQuietSDKLogsDemotesRoutineMessages(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		var buf bytes.Buffer
		log := slog.New(QuietSDKLogs(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level}))).With("k", "v")
		log.Info("server session connected", "session_id", "")
		log.Error("method removed in the new protocol", "method", "ping")
		log.Warn("calling tools/call: boom")
		log.Info("serving MCP over Streamable HTTP")
		log.Error("internal error", "err", "disk full")
		out := buf.String()
		for _, want := range []string{`level=INFO msg="serving MCP over Streamable HTTP" k=v`, `level=ERROR msg="internal error" k=v err="disk full"`} {
			if !strings.Contains(out, want) {
				t.Errorf("level %v: %q missing from\n%s", level, want, out)
			}
		}
		routine := strings.Count(out, "server session connected") + strings.Count(out, "method removed") + strings.Count(out, "calling tools/call")
		switch level {
		case slog.LevelInfo:
			if routine != 0 {
				t.Errorf("at info, routine SDK messages were logged:\n%s", out)
			}
		case slog.LevelDebug:
			if routine != 3 || strings.Count(out, "level=DEBUG") != 3 {
				t.Errorf("at debug, routine SDK messages were not logged at DEBUG:\n%s", out)
			}
		}
	}
}
