package mcpadapter

import "log/slog"

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

// sdkLogger is the logger the SDK server gets: l with its session lifecycle
// messages (sdkSessionMessages) at Debug.
func sdkLogger(l *slog.Logger) *slog.Logger {
	return slog.New(demoteHandler{l.Handler(), func(msg string) bool { return sdkSessionMessages[msg] }})
}

// stdioEras describes, for the session log lines, the two SDK sessions a
// stdio client is served by.
const stdioEras = "legacy (initialize, 2024-11-05 to 2025-11-25) and 2026-07-28 (per-request _meta)"
