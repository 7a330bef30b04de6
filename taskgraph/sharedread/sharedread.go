package sharedread

import (
	"context"
	"sync"
)

// Group shares reads by key; its zero value is ready to use.
type Group[K comparable, V any] struct {
	mu   sync.Mutex
	keys map[K]*reads[V]
}

// reads is one key's running read and the one queued behind it.
type reads[V any] struct {
	running *read[V]
	queued  *read[V]
}

// read is one run of fn and the callers it answers.
type read[V any] struct {
	// ctx and fn are those of the caller that made the read.
	ctx  context.Context
	fn   func(context.Context) (V, error)
	done chan struct{}
	// callers counts the calls the read answers (for the tests).
	callers int
	v       V
	err     error
}

// Do returns fn's answer for key, from a run of fn that started after Do
// was called and that the callers of key waiting at that moment share.
// fn runs in a goroutine of its own, with the context of the caller that
// made the read, stripped of its cancellation; Do returns ctx.Err() if
// ctx ends first.
func (g *Group[K, V]) Do(ctx context.Context, key K, fn func(context.Context) (V, error)) (V, error) {
	g.mu.Lock()
	if g.keys == nil {
		g.keys = make(map[K]*reads[V])
	}
	k := g.keys[key]
	if k == nil {
		k = &reads[V]{}
		g.keys[key] = k
	}
	r := k.queued
	switch {
	case k.running == nil:
		r = &read[V]{ctx: context.WithoutCancel(ctx), fn: fn, done: make(chan struct{})}
		k.running = r
		go g.run(key, k, r)
	case r == nil:
		// One runs: it may have started before this call, so this call
		// waits for the next, which starts when that one ends.
		r = &read[V]{ctx: context.WithoutCancel(ctx), fn: fn, done: make(chan struct{})}
		k.queued = r
	}
	r.callers++
	g.mu.Unlock()
	select {
	case <-r.done:
		return r.v, r.err
	case <-ctx.Done():
		var zero V
		return zero, ctx.Err()
	}
}

// run runs r, then the read queued behind it, if any.
func (g *Group[K, V]) run(key K, k *reads[V], r *read[V]) {
	for r != nil {
		r.v, r.err = r.fn(r.ctx)
		g.mu.Lock()
		close(r.done)
		k.running, k.queued = k.queued, nil
		r = k.running
		if r == nil {
			delete(g.keys, key)
		}
		g.mu.Unlock()
	}
}

// Len returns how many keys have a read running or waiting.
func (g *Group[K, V]) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.keys)
}
