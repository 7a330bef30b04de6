package schema

import (
	"context"
	"errors"
	"fmt"
)

// ErrTooOld matches the error RequireLatest returns for a database whose
// schema is older than this binary's (including one never initialised): a
// reader that must not write cannot migrate it.
var ErrTooOld = errors.New("database schema is older than this binary")

// RequireLatest reads the schema version of the database behind q without
// writing to it and returns it if it is exactly Latest. An older version is
// an error matching ErrTooOld; a newer one matches ErrTooNew; another
// program's database matches ErrForeign. Read-only openers use it: they may
// neither migrate a database nor read one whose tables they do not know.
func RequireLatest(ctx context.Context, q Queryer) (int, error) {
	return requireLatest(ctx, q, Latest())
}

func requireLatest(ctx context.Context, q Queryer, latest int) (int, error) {
	v, err := inspect(ctx, q, latest)
	if err != nil {
		return v, err
	}
	if v < latest {
		return v, fmt.Errorf("%w: the database is at version %d and this binary reads version %d; open it once read-write with this binary (start graph-engineering-mcp serve on it, which migrates it), or use the binary that wrote it (the database was left untouched)", ErrTooOld, v, latest)
	}
	return v, nil
}
