package main

import (
	"slices"
	"sync"
)

// cleanups are the teardowns of what the bench has running (its scenarios, and with them the
// HAProxies, neighbours and cgroups), for the signal handler: an interrupted bench must not
// leave a switch, namespaces and cgroups behind, which would hold the host's one userspace
// Open vSwitch and the lab lock's purpose with it.
type cleanups struct {
	mu   sync.Mutex
	next int
	fns  map[int]func()
}

// add registers fn and returns a function that runs it once and unregisters it; runAll
// runs it instead if it comes first. Either way fn runs at most once.
func (c *cleanups) add(fn func()) func() {
	once := sync.OnceFunc(fn)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fns == nil {
		c.fns = map[int]func(){}
	}
	id := c.next
	c.next++
	c.fns[id] = once
	return func() {
		c.mu.Lock()
		delete(c.fns, id)
		c.mu.Unlock()
		once()
	}
}

// runAll runs every registered teardown, the newest first, and unregisters them.
func (c *cleanups) runAll() {
	c.mu.Lock()
	ids := make([]int, 0, len(c.fns))
	for id := range c.fns {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	slices.Reverse(ids)
	fns := make([]func(), 0, len(ids))
	for _, id := range ids {
		fns = append(fns, c.fns[id])
		delete(c.fns, id)
	}
	c.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// teardowns is what the bench's signal handler tears down.
var teardowns cleanups
