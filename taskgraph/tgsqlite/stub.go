// Package tgsqlite is a STUB for compiling the domain; replaced at merge.
package tgsqlite

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

type SyncMode string

const (
	SyncFull   SyncMode = "full"
	SyncNormal SyncMode = "normal"
)

const DefaultBusyTimeout = 10 * time.Second

type Options struct {
	Sync          SyncMode
	Logger        *slog.Logger
	BusyTimeout   time.Duration
	MaxBatch      int
	ReadConns     int
	WatchInterval time.Duration
}

type Driver struct{ tgdriver.Driver }

func Open(ctx context.Context, path string, o Options) (*Driver, error)         { return nil, nil }
func OpenReadOnly(ctx context.Context, path string, o Options) (*Driver, error) { return nil, nil }
func (d *Driver) Path() string                                                  { return "" }
func (d *Driver) Check(ctx context.Context) (CheckResult, error)                { return CheckResult{}, nil }
func (d *Driver) Backup(ctx context.Context, dest string) error                 { return nil }

type CheckResult struct {
	Integrity                                       []string
	Checkpointed                                    bool
	CheckpointBusy, WALFrames, CheckpointedFrames int
	WALBytes                                        int64
}

func (r CheckResult) OK() bool { return true }

type CheckpointResult struct {
	WALFrames, CopiedFrames int
	Truncated               bool
	WALBytes                int64
}

func Checkpoint(ctx context.Context, path string) (CheckpointResult, error) { return CheckpointResult{}, nil }
func DefaultPath() (string, error)                                          { return "", nil }

var ErrNoDatabase = errors.New("no database")
var ErrBackupExists = errors.New("backup destination exists")
