// Package pgtest gives tests a fresh, empty PostgreSQL database each.
//
// # Invariants
//
//   - URL returns the URL of a database created for the calling test alone
//     (CREATE DATABASE with a unique name) on the server named by the
//     environment variable GRAPH_ENGINEERING_TEST_POSTGRES, and drops it
//     when the test ends (t.Cleanup), closing the connections left to it.
//   - An unset variable fails the test, saying how to start a server
//     (scripts/postgres start) or how to skip on purpose: the value "skip"
//     skips the test. A PostgreSQL test never passes silently without a
//     database.
//   - Nothing it reports holds the server's password.
//   - CutProxy (cut.go) stands between a client and the server and drops a
//     connection at the message a test chose (after or instead of a COMMIT,
//     or at once), for tests of what a client is told when a commit's
//     answer is lost.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/testwait"
)

// EnvVar names the environment variable holding the test server's URL.
const EnvVar = "GRAPH_ENGINEERING_TEST_POSTGRES"

// Server returns the URL of the test server (its maintenance database), or
// fails or skips t as URL does.
func Server(t testing.TB) string {
	t.Helper()
	v := strings.TrimSpace(os.Getenv(EnvVar))
	switch {
	case v == "skip":
		t.Skip(EnvVar + "=skip: PostgreSQL tests skipped on purpose")
	case v == "":
		t.Fatal(EnvVar + " is not set: this test needs a PostgreSQL server. Start one with\n" +
			"\teval \"$(scripts/postgres start)\"\n" +
			"(from the repository root; scripts/postgres stop removes it), or set " + EnvVar +
			"=postgres://user:password@host:port/postgres to use your own server, or " + EnvVar + "=skip to skip these tests explicitly")
	}
	return v
}

// URL returns the URL of a fresh empty database for t, dropped in t.Cleanup.
func URL(t testing.TB) string {
	t.Helper()
	server := Server(t)
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("%s is not a postgres:// URL", EnvVar)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "ge_test_" + hex.EncodeToString(b[:])

	// Creating and dropping a database take as long as the server needs:
	// only the test binary's deadline bounds them (testwait.Context), so a
	// loaded server makes a test slower, never red.
	ctx := testwait.Context(t)
	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Fatalf("connect to the test server (%s): %s", redacted(u), scrub(err, u))
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+name); err != nil {
		t.Fatalf("create test database %s: %s", name, scrub(err, u))
	}
	t.Cleanup(func() { // runs before ctx's own cleanup ends it
		c, err := pgx.Connect(ctx, server)
		if err != nil {
			t.Errorf("drop test database %s: connect: %s", name, scrub(err, u))
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`); err != nil {
			t.Errorf("drop test database %s: %s", name, scrub(err, u))
		}
	})
	db := *u
	db.Path = "/" + name
	return db.String()
}

func redacted(u *url.URL) string { return u.Redacted() }

// scrub returns err's text without the server's password.
func scrub(err error, u *url.URL) string {
	s := err.Error()
	if p, ok := u.User.Password(); ok && p != "" {
		s = strings.ReplaceAll(s, p, "xxxxx")
	}
	return s
}
