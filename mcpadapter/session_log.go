package mcpadapter

import (
	"context"
	"log/slog"
)

// sdkSessionMessages are the SDK's per-session lifecycle messages. A router
// (stdio, in-memory transports) opens one SDK session per protocol era for a
// single client, so at Info each of them would appear twice with identical
// text and nothing saying which era it is for. They are logged at Debug, and
// ServeStdio logs one line when the client's stream starts and one when it
// ends, naming both eras.
var sdkSessionMessages = map[string]bool{
	"server connecting":           true,
	"server session connected":    true,
	"server session disconnected": true,
}

// sessionLogHandler demotes sdkSessionMessages to Debug; everything else
// passes through unchanged.
type sessionLogHandler struct{ slog.Handler }

// sdkLogger is the logger the SDK server gets: l with its session lifecycle
// messages at Debug.
func sdkLogger(l *slog.Logger) *slog.Logger { return slog.New(sessionLogHandler{l.Handler()}) }

// Handle implements slog.Handler.
func (h sessionLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level > slog.LevelDebug && sdkSessionMessages[r.Message] {
		if !h.Handler.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
		r.Level = slog.LevelDebug
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h sessionLogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return sessionLogHandler{h.Handler.WithAttrs(attrs)}
}

// WithGroup implements slog.Handler.
func (h sessionLogHandler) WithGroup(name string) slog.Handler {
	return sessionLogHandler{h.Handler.WithGroup(name)}
}

// stdioEras describes, for the session log lines, the two SDK sessions a
// stdio client is served by.
const stdioEras = "legacy (initialize, 2024-11-05 to 2025-11-25) and 2026-07-28 (per-request _meta)"
