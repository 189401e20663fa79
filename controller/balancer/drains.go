package balancer

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"flowweight/collector"
)

// drains owns operator drains: an operator's Drain through the API, and in HA the drain set
// etcd holds, which every controller applies. The pool holds each backend's flag; drains is
// the one writer of it besides what a reload restores (install).
type drains struct {
	pool  *collector.Pool
	store Store
	// kick asks for an update; saved writes the state document (a drain the API confirmed
	// survives a restart).
	kick, save func()

	mu   sync.Mutex
	seen map[string]bool // the last drain set the store reported; nil until the first
}

// Drain drains or undrains a backend by name: ErrNoBackend when no backend has the name.
// The store takes it first (HA: etcd, so every controller applies it and it holds after a
// failover); when the store does not take it, nothing changes and the error says so.
func (d *drains) Drain(ctx context.Context, name string, drained bool) error {
	if _, ok := drainStates(d.pool)[name]; !ok {
		return fmt.Errorf("%w named %q", ErrNoBackend, name)
	}
	cctx, cancel := context.WithTimeout(ctx, haTimeout)
	err := d.store.SetDrain(cctx, name, drained)
	cancel()
	if err != nil {
		return err
	}
	if !d.pool.Drain(name, drained) {
		return fmt.Errorf("%w named %q", ErrNoBackend, name)
	}
	d.save() // before answering: a drain the API confirmed survives a restart
	d.kick()
	return nil
}

// watch applies the store's drain sets until ctx ends (HA; a file store returns at once).
func (d *drains) watch(ctx context.Context, log *slog.Logger) {
	if err := d.store.WatchDrains(ctx, d.apply); err != nil && ctx.Err() == nil {
		log.Error("watching drains in etcd stopped", "err", err)
	}
}

// apply makes the store's drains the pool's: every controller then drains what an operator
// drained through any of them.
func (d *drains) apply(set map[string]bool) {
	d.mu.Lock()
	d.seen = set
	d.mu.Unlock()
	d.sync()
}

// sync applies the last drain set the store reported to the configured backends (after a
// watch event, and after a reload that added backends).
func (d *drains) sync() {
	d.mu.Lock()
	set := d.seen
	d.mu.Unlock()
	if set == nil {
		return
	}
	changed := false
	for name, on := range drainStates(d.pool) {
		if set[name] != on {
			reason := "undrained by operator (etcd)"
			if set[name] {
				reason = "drained by operator (etcd)"
			}
			d.pool.SetOperatorDrain(name, set[name], reason)
			changed = true
		}
	}
	if changed {
		d.kick()
	}
}

// drainStates is every pool backend's operator drain flag.
func drainStates(pool *collector.Pool) map[string]bool {
	out := map[string]bool{}
	for _, st := range pool.Snapshot(nil) {
		out[st.Name] = st.OperatorDrain
	}
	return out
}

// operatorDrains is the pool's operator-drained backends.
func operatorDrains(pool *collector.Pool) map[string]bool {
	out := map[string]bool{}
	for _, st := range pool.Snapshot(nil) {
		if st.OperatorDrain {
			out[st.Name] = true
		}
	}
	return out
}
