// Package pgtest gives tests a fresh, empty PostgreSQL database each.
//
// # Invariants
//
//   - URL returns the URL of a database created for the calling test alone
//     (CREATE DATABASE with a unique name) on the server named by the
//     environment variable GRAPH_ENGINEERING_TEST_POSTGRES, and drops it
//     when the test ends (t.Cleanup), closing the connections left to it.
//   - CollatedURL does the same for a database whose text sorts by ICU's
//     en-US collation rather than by bytes (where the server can), so that
//     a test can show an order does not depend on the database's locale.
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
	return create(t, "")
}

// CollatedURL is URL for a database whose text sorts by a linguistic
// collation (ICU's en-US: "a" before "B", punctuation nearly ignored)
// rather than by bytes, as many servers' default locales do: for tests of
// orders that must not depend on the database's collation. A server that
// cannot create one (before PostgreSQL 15, or built without ICU) gives a
// database of its default collation, and the test logs that it does.
func CollatedURL(t testing.TB) string {
	t.Helper()
	return create(t, icuCollation)
}

// icuCollation is CollatedURL's CREATE DATABASE options.
const icuCollation = ` TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US'`

// create creates a fresh database with the CREATE DATABASE options opts,
// dropped in t.Cleanup, and returns its URL.
func create(t testing.TB, opts string) string {
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
	_, err = admin.Exec(ctx, `CREATE DATABASE `+name+opts)
	if err != nil && opts != "" {
		t.Logf("create test database %s with%s: %s; using the server's default collation", name, opts, scrub(err, u))
		_, err = admin.Exec(ctx, `CREATE DATABASE `+name)
	}
	if err != nil {
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
