package taskgraph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/idempotency"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/tgdriver"
)

// Request ids: the package doc ("Request ids") states their rules; this
// file keeps, replays and prunes the answers.

// MaxRequestIDLen bounds a request id, in bytes.
const MaxRequestIDLen = MaxIdentifierLen

// RequestRetention is how long the store keeps a request's answer.
const RequestRetention = 24 * time.Hour

// MaxRequestsPerPrincipal is the default bound of the request ids one
// principal keeps (Options.MaxRequestsPerPrincipal).
const MaxRequestsPerPrincipal = 100_000

// requestCheckEvery is how often the sweeper removes expired answers and
// counts what each principal keeps.
const requestCheckEvery = time.Minute

// requestPruneBatch bounds the answers one sweeper write removes.
const requestPruneBatch = 5000

// requestIDKey is the context key of a write's request id.
type requestIDKey struct{}

// WithRequestID returns ctx carrying id as the request id of the write it
// is passed to (create, claim, heartbeat, complete, fail, cancel, release).
// See package doc, "Request ids".
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestIDFrom returns the request id ctx carries, "" when none (an empty
// id is none).
func RequestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// CheckRequestID reports whether id is a valid request id: an identifier
// (IdentifierPattern, at most MaxRequestIDLen characters), such as a UUID.
func CheckRequestID(id string) error {
	return checkIdentifier("request_id", id)
}

// request is one write's request id, resolved: its scope and the digests
// of its arguments.
type request struct {
	id, principal, owner string
	key                  string
	op                   string
	args                 map[string]string
}

// newRequest resolves ctx's request id for operation op of owner with
// args (each JSON-encoded to its digest); nil when ctx carries none.
func newRequest(ctx context.Context, op, owner string, args map[string]any) (*request, error) {
	id := RequestIDFrom(ctx)
	if id == "" {
		return nil, nil
	}
	if err := CheckRequestID(id); err != nil {
		return nil, err
	}
	digests, err := idempotency.Digests(args)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errInternal, err)
	}
	rq := &request{id: id, principal: PrincipalFrom(ctx), owner: owner, op: op, args: digests}
	rq.key = idempotency.Key(rq.principal, owner, id)
	return rq, nil
}

// same reports whether rq and o are the same write: the same operation
// with the same arguments.
func (rq *request) same(o *request) bool {
	return rq.op == o.op && maps.Equal(rq.args, o.args)
}

// replay looks rq up in w's transaction: when its answer is kept it
// decodes it into dest and reports true; when the id was used for another
// operation or other arguments it fails naming the difference.
func (w *wtx) replay(rq *request, dest any) (bool, error) {
	kept, err := w.tx.Requests(w.ctx, []string{rq.key})
	if err != nil {
		return false, err
	}
	r, ok := kept[rq.key]
	return w.replayKept(rq, r, ok, dest)
}

// replayKept is replay with the kept request read (ok false: none kept).
func (w *wtx) replayKept(rq *request, kept tgdriver.RequestRow, ok bool, dest any) (bool, error) {
	if !ok {
		return false, nil
	}
	if kept.Op != rq.op {
		return false, invalid("request_id", "%q was used for a %s; a request id names one write: use a new one for this %s (nothing was written)", rq.id, kept.Op, rq.op)
	}
	var args map[string]string
	if err := json.Unmarshal([]byte(kept.Args), &args); err != nil {
		return false, fmt.Errorf("%w: read the kept arguments of request %q: %v", errInternal, rq.id, err)
	}
	if differ := idempotency.Differ(rq.args, args); len(differ) > 0 {
		return false, invalid("request_id", "%q was used for a %s with a different %s; a retry must repeat the write exactly (use a new request id for a new write; nothing was written)",
			rq.id, kept.Op, strings.Join(differ, ", "))
	}
	if err := json.Unmarshal([]byte(kept.Answer), dest); err != nil {
		return false, fmt.Errorf("%w: read the kept answer of request %q: %v", errInternal, rq.id, err)
	}
	if c, ok := dest.(*Claimed); ok {
		tok, err := rq.openToken(c.Lease.Token)
		if err != nil {
			return false, err
		}
		c.Lease.Token = tok
	}
	w.afterCommit(func() { w.s.stats.replays.Add(1) })
	return true, nil
}

// keep records answer as rq's in w's transaction.
func (w *wtx) keep(rq *request, answer any) error {
	r, err := w.keepRow(rq, answer)
	if err != nil {
		return err
	}
	return w.tx.KeepRequest(w.ctx, r)
}

// keepRow is the row that keeps answer as rq's.
func (w *wtx) keepRow(rq *request, answer any) (tgdriver.RequestRow, error) {
	if c, ok := answer.(Claimed); ok {
		c.Lease.Token = idempotency.Seal(rq.id, rq.key, c.Lease.Token) // the kept form
		answer = c
	}
	a, err := json.Marshal(answer)
	if err != nil {
		return tgdriver.RequestRow{}, fmt.Errorf("%w: encode the answer of request %q: %v", errInternal, rq.id, err)
	}
	args, err := json.Marshal(rq.args)
	if err != nil {
		return tgdriver.RequestRow{}, fmt.Errorf("%w: encode the arguments of request %q: %v", errInternal, rq.id, err)
	}
	return tgdriver.RequestRow{Key: rq.key, Principal: rq.principal, Op: rq.op, Args: string(args), Answer: string(a), CreatedAtMS: w.nowMS}, nil
}

// kept runs fn as a write of rq (nil: no request id): in the same
// transaction, a kept answer is decoded into answer instead of running fn,
// and fn's answer, once fn succeeded, is kept. answer points to the
// variable fn sets.
func (w *wtx) kept(rq *request, answer any, fn func() error) error {
	if rq == nil {
		return fn()
	}
	found, err := w.replay(rq, answer)
	if err != nil || found {
		return err
	}
	if err := fn(); err != nil {
		return err
	}
	return w.keep(rq, answer)
}

// PruneRequests removes the request answers kept longer than
// RequestRetention, and each principal's oldest beyond
// Options.MaxRequestsPerPrincipal. The server's sweeper calls it every
// minute; it returns how many answers it removed.
func (s *Store) PruneRequests(ctx context.Context) (int, error) {
	total := 0
	for {
		var n int
		err := s.do(ctx, func(w *wtx) error {
			var err error
			n, err = w.tx.PruneRequests(w.ctx, w.now.Add(-RequestRetention).UnixMilli(), requestPruneBatch)
			return err
		})
		if err != nil {
			return total, fmt.Errorf("remove expired request answers: %w", err)
		}
		total += n
		if n < requestPruneBatch {
			break
		}
	}
	keep := s.opts.MaxRequestsPerPrincipal
	var over map[string]int
	err := s.do(ctx, func(w *wtx) error {
		var err error
		over, err = w.tx.RequestPrincipals(w.ctx, keep)
		return err
	})
	if err != nil {
		return total, fmt.Errorf("count kept request answers: %w", err)
	}
	for _, p := range slices.Sorted(maps.Keys(over)) {
		for {
			var n int
			err := s.do(ctx, func(w *wtx) error {
				var err error
				n, err = w.tx.TrimRequests(w.ctx, p, keep, requestPruneBatch)
				return err
			})
			if err != nil {
				return total, fmt.Errorf("remove the oldest request answers of principal %q: %w", p, err)
			}
			total += n
			if n < requestPruneBatch {
				break
			}
		}
	}
	return total, nil
}

// requestSweeper runs PruneRequests and PruneIdleKeys every
// requestCheckEvery until Close.
func (s *Store) requestSweeper() {
	defer s.wg.Done()
	ctx, cancel := s.quitContext()
	defer cancel()
	for {
		if n, err := s.PruneRequests(ctx); err != nil {
			if errors.Is(err, ErrClosed) || ctx.Err() != nil {
				return
			}
			s.log.Warn("removing expired request answers failed; retrying in a minute", "err", err)
		} else if n > 0 {
			s.log.Debug("expired request answers removed", "count", n)
		}
		if n, err := s.PruneIdleKeys(ctx); err != nil {
			if errors.Is(err, ErrClosed) || ctx.Err() != nil {
				return
			}
			s.log.Warn("pruning idle concurrency keys failed; retrying in a minute", "err", err)
		} else if n > 0 {
			s.log.Debug("idle concurrency keys pruned", "count", n)
		}
		t := time.NewTimer(requestCheckEvery)
		select {
		case <-s.quit:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// openToken is the token sealed as sealed.
func (rq *request) openToken(sealed string) (string, error) {
	t, ok := idempotency.Open(rq.id, rq.key, sealed)
	if !ok {
		return "", fmt.Errorf("%w: the kept claim token of request %q is not sealed", errInternal, rq.id)
	}
	return t, nil
}
