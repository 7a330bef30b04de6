package wire

import (
	"context"
	"log/slog"
	"strings"
)

// sdkRoutineMessages are what the SDK (v1.8.0) logs, at Info or Error, for every
// stateless HTTP request (each is a short-lived session) or for a client's
// protocol mistake that the client already receives as an error response.
// At HTTP request rates they would drown the server's own logs.
// The session lifecycle messages (sdkSessionMessages) are among them.
var sdkRoutineMessages = map[string]bool{
	"session initialized":                  true,
	"method removed in the new protocol":   true,
	"method invalid during initialization": true,
	"initialized before initialize":        true,
	"duplicate initialized notification":   true,
	"duplicate initialize request":         true,
}

// sdkRoutinePrefixes are message prefixes of the same kind: "calling M: err"
// repeats an error response; the adapter logs internal faults itself.
var sdkRoutinePrefixes = []string{"calling "}

// QuietSDKLogs wraps h so that the SDK's per-request and client-mistake
// messages (see sdkRoutineMessages) are logged at Debug instead of Info or
// Error. Everything else passes through unchanged.
func QuietSDKLogs(h slog.Handler) slog.Handler { return demoteHandler{h, routineSDKMessage} }

// demoteHandler logs the records whose message matches at Debug instead of
// their own level; everything else passes through unchanged.
type demoteHandler struct {
	slog.Handler
	match func(msg string) bool
}

// Handle implements slog.Handler.
func (d demoteHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level > slog.LevelDebug && d.match(r.Message) {
		if !d.Handler.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
		r.Level = slog.LevelDebug
	}
	return d.Handler.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (d demoteHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return demoteHandler{d.Handler.WithAttrs(attrs), d.match}
}

// WithGroup implements slog.Handler.
func (d demoteHandler) WithGroup(name string) slog.Handler {
	return demoteHandler{d.Handler.WithGroup(name), d.match}
}

// sdkSessionMessages are the SDK's per-session lifecycle messages. A stdio
// connection is served by one SDK session per protocol era, and every
// stateless HTTP request is a session of its own, so at Info each of them
// would repeat per request or appear twice with nothing saying which era it
// is for. Upstream: modelcontextprotocol/go-sdk#1204 (open).
var sdkSessionMessages = map[string]bool{
	"server connecting":           true,
	"server session connected":    true,
	"server session disconnected": true,
}

// SDKLogger is the logger the SDK server gets: l with its session lifecycle
// messages (sdkSessionMessages) at Debug.
func SDKLogger(l *slog.Logger) *slog.Logger {
	return slog.New(demoteHandler{l.Handler(), func(msg string) bool { return sdkSessionMessages[msg] }})
}

func routineSDKMessage(msg string) bool {
	if sdkRoutineMessages[msg] || sdkSessionMessages[msg] {
		return true
	}
	for _, p := range sdkRoutinePrefixes {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}
