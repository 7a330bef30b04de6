package tgpostgres

import "testing"

// The driver's embedded series loads: numbered from 1 without gaps, each
// file non-empty (no database needed).
func TestEmbeddedMigrationsLoad(t *testing.T) {
	t.Parallel()
	s, err := Schema()
	if err != nil {
		t.Fatal(err)
	}
	if s.Latest() != len(s.Migrations) || s.Latest() == 0 {
		t.Fatalf("Latest %d of %d migrations", s.Latest(), len(s.Migrations))
	}
	for _, m := range s.Migrations {
		if len(m.SQL) == 0 {
			t.Errorf("migration %s is empty", m.Name)
		}
	}
}
