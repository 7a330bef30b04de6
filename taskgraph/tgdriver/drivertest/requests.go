package drivertest

import (
	"errors"
	"fmt"
	"maps"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// requestTests: the kept answers of writes that carried a request id.
var requestTests = []test{
	{"KeepAndRead", testKeepRequest},
	{"PruneAndTrim", testPruneRequests},
}

// request is a kept request of principal p, created at ms, under key k.
func request(k, p string, ms int64) tgdriver.RequestRow {
	return tgdriver.RequestRow{Key: k, Principal: p, Op: "complete", Args: `{"result":"` + k + `"}`,
		Answer: `{"state":"completed","key":"` + k + `"}`, CreatedAtMS: ms}
}

// testKeepRequest: Requests finds nothing before KeepRequest (or Apply's
// Requests) and, after it committed, exactly the rows kept, by key, in a
// later transaction and in the same one, as Fetch's Requests do; a
// rolled-back KeepRequest keeps nothing.
func testKeepRequest(t *testing.T, h Harness) {
	e := newEnv(t, h)
	r := request("k1", "alice", 1000)
	r.Principal = "" // unauthenticated: the empty principal is a value
	r3, r4 := request("k3", "carol", 3000), request("k4", "dave", 4000)
	e.write(func(tx tgdriver.Tx) error {
		if got, err := tx.Requests(e.ctx, []string{r.Key}); len(got) != 0 || err != nil {
			return fmt.Errorf("tx.Requests before KeepRequest = %+v %v, want none", got, err)
		}
		if err := tx.KeepRequest(e.ctx, r); err != nil {
			return err
		}
		if err := tx.Apply(e.ctx, tgdriver.Apply{Requests: []tgdriver.RequestRow{r3, r4}}); err != nil {
			return err
		}
		if got, err := tx.Requests(e.ctx, []string{r.Key, r4.Key}); err != nil || len(got) != 2 || got[r.Key] != r || got[r4.Key] != r4 {
			return fmt.Errorf("tx.Requests in the transaction that kept them = %+v %v, want %+v and %+v", got, err, r, r4)
		}
		return nil
	})
	e.write(func(tx tgdriver.Tx) error {
		got, err := tx.Requests(e.ctx, []string{"other", r3.Key, r.Key, r4.Key})
		if want := map[string]tgdriver.RequestRow{r.Key: r, r3.Key: r3, r4.Key: r4}; err != nil || !maps.Equal(got, want) {
			return fmt.Errorf("tx.Requests after the commit = %+v %v, want %+v (no row for a key none kept)", got, err, want)
		}
		// Fetch reads them as Requests does, in its round.
		f, err := tx.Fetch(e.ctx, tgdriver.Fetch{Requests: []string{"other", r3.Key, r.Key}, Claims: []tgdriver.ClaimScan{{N: 1}}})
		if want := map[string]tgdriver.RequestRow{r.Key: r, r3.Key: r3}; err != nil || !maps.Equal(f.Kept, want) {
			return fmt.Errorf("tx.Fetch's Kept after the commit = %+v %v, want %+v (no row for a key none kept)", f.Kept, err, want)
		}
		if f, err := tx.Fetch(e.ctx, tgdriver.Fetch{Claims: []tgdriver.ClaimScan{{N: 1}}}); err != nil || f.Kept != nil {
			return fmt.Errorf("tx.Fetch without requests: Kept %+v %v, want nil", f.Kept, err)
		}
		return nil
	})
	before := e.dump()
	errRollback := errors.New("roll back the kept request")
	if err := e.d.Write(e.ctx, func(tx tgdriver.Tx) error {
		if err := tx.KeepRequest(e.ctx, request("k2", "bob", 2000)); err != nil {
			return err
		}
		return errRollback
	}); !errors.Is(err, errRollback) {
		t.Fatalf("Write: %v, want the function's error", err)
	}
	e.unchanged(before, "a rolled-back KeepRequest")
}

// testPruneRequests: PruneRequests removes up to limit requests kept
// before beforeMS, oldest first; RequestPrincipals counts each principal
// keeping more than keep; TrimRequests removes up to limit of one
// principal's requests beyond its keep newest, oldest first, and no other
// principal's.
func testPruneRequests(t *testing.T, h Harness) {
	e := newEnv(t, h)
	e.write(func(tx tgdriver.Tx) error {
		for _, r := range []tgdriver.RequestRow{
			request("a1", "alice", 100), request("a5", "alice", 500), request("a3", "alice", 300),
			request("a4", "alice", 400), request("a2", "alice", 200), request("a6", "alice", 600),
			request("b1", "bob", 150), request("b2", "bob", 250), request("c1", "carol", 50),
		} {
			if err := tx.KeepRequest(e.ctx, r); err != nil {
				return err
			}
		}
		return nil
	})
	kept := func() []string {
		t.Helper()
		var out []string
		for _, r := range e.db.Query(t, `SELECT request_key FROM requests ORDER BY created_at_ms`) {
			out = append(out, r[0])
		}
		return out
	}
	step := func(what string, fn func(tx tgdriver.Tx) (int, error), n int, left []string) {
		t.Helper()
		var got int
		e.write(func(tx tgdriver.Tx) error {
			var err error
			got, err = fn(tx)
			return err
		})
		if got != n {
			t.Errorf("%s removed %d, want %d", what, got, n)
		}
		if k := kept(); !eq(k, left) {
			t.Errorf("after %s: kept %v, want %v", what, k, left)
		}
	}
	q := func(keys ...string) []string {
		for i, k := range keys {
			keys[i] = `"` + k + `"`
		}
		return keys
	}
	// Kept before 200: c1 (50), a1 (100), b1 (150), oldest first.
	step("PruneRequests(200, 2)", func(tx tgdriver.Tx) (int, error) { return tx.PruneRequests(e.ctx, 200, 2) }, 2,
		q("b1", "a2", "b2", "a3", "a4", "a5", "a6"))
	step("PruneRequests(200, 10)", func(tx tgdriver.Tx) (int, error) { return tx.PruneRequests(e.ctx, 200, 10) }, 1,
		q("a2", "b2", "a3", "a4", "a5", "a6"))
	e.write(func(tx tgdriver.Tx) error {
		for _, c := range []struct {
			keep int
			want map[string]int
		}{{0, map[string]int{"alice": 5, "bob": 1}}, {1, map[string]int{"alice": 5}}, {5, map[string]int{}}} {
			got, err := tx.RequestPrincipals(e.ctx, c.keep)
			if err != nil || !maps.Equal(got, c.want) {
				t.Errorf("RequestPrincipals(%d) = %v, %v; want %v", c.keep, got, err, c.want)
			}
		}
		return nil
	})
	// alice's newest 3 are a4, a5, a6: a2 then a3 are beyond them.
	step("TrimRequests(alice, 3, 1)", func(tx tgdriver.Tx) (int, error) { return tx.TrimRequests(e.ctx, "alice", 3, 1) }, 1,
		q("b2", "a3", "a4", "a5", "a6"))
	step("TrimRequests(alice, 3, 10)", func(tx tgdriver.Tx) (int, error) { return tx.TrimRequests(e.ctx, "alice", 3, 10) }, 1,
		q("b2", "a4", "a5", "a6"))
	step("TrimRequests(alice, 3, 10) again", func(tx tgdriver.Tx) (int, error) { return tx.TrimRequests(e.ctx, "alice", 3, 10) }, 0,
		q("b2", "a4", "a5", "a6"))
	step("TrimRequests(nobody, 0, 10)", func(tx tgdriver.Tx) (int, error) { return tx.TrimRequests(e.ctx, "nobody", 0, 10) }, 0,
		q("b2", "a4", "a5", "a6"))
	step("PruneRequests(1000, 10)", func(tx tgdriver.Tx) (int, error) { return tx.PruneRequests(e.ctx, 1000, 10) }, 4, nil)
}
