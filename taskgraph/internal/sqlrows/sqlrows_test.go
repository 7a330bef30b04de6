package sqlrows

import "testing"

func TestDollar(t *testing.T) {
	for in, want := range map[string]string{
		`SELECT 1`:                              `SELECT 1`,
		`UPDATE t SET a = ?, b = ? WHERE c = ?`: `UPDATE t SET a = $1, b = $2 WHERE c = $3`,
		`SELECT '?', "a?" FROM t WHERE x = ?`:   `SELECT '?', "a?" FROM t WHERE x = $1`,
		`SELECT 'it''s ?' WHERE y = ?`:          `SELECT 'it''s ?' WHERE y = $1`,
	} {
		if got := Dollar(in); got != want {
			t.Errorf("Dollar(%q) = %q, want %q", in, got, want)
		}
	}
}
