package schema

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// RequireLatest accepts only the newest version and refuses, without
// writing, an empty database, an older one and a newer one.
func TestRequireLatest(t *testing.T) {
	ctx := context.Background()
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	db := openFile(t)
	if _, err := RequireLatest(ctx, db); !errors.Is(err, ErrTooOld) || !strings.Contains(err.Error(), "serve") {
		t.Fatalf("empty database: %v, want ErrTooOld saying to start serve", err)
	}
	if _, _, err := applyIn(t, db, ms); err != nil {
		t.Fatal(err)
	}
	if v, err := RequireLatest(ctx, db); err != nil || v != Latest() {
		t.Fatalf("current database: %d, %v", v, err)
	}
	// Against a binary that knows one more version, this database is old.
	if v, err := requireLatest(ctx, db, Latest()+1); !errors.Is(err, ErrTooOld) || v != Latest() {
		t.Fatalf("older database: %d, %v, want ErrTooOld", v, err)
	}
	if _, err := requireLatest(ctx, db, Latest()-1); !errors.Is(err, ErrTooNew) {
		t.Fatalf("newer database: %v, want ErrTooNew", err)
	}
	if got := readVersion(t, db); got.version != int64(Latest()) {
		t.Fatalf("version changed to %d", got.version)
	}
}
