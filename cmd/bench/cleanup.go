package main

import (
	"slices"
	"sync"
	"time"
)

// cleanups are the teardowns of what the bench has running (its scenarios, and with them the
// HAProxies, neighbours and cgroups), for the signal handler: an interrupted bench must not
// leave a switch, namespaces and cgroups behind, which would hold the host's one userspace
// Open vSwitch and the lab lock's purpose with it.
//
// A scenario being started has nothing registered yet, so runAll first waits (startWait at
// most) for the starts under way (begin) to register their teardown: an interrupt during a
// start would otherwise leave everything that start had brought up behind.
type cleanups struct {
	mu   sync.Mutex
	next int
	fns  map[int]func()
	// starting counts the starts under way; closing is set once runAll began, after which no
	// new start begins.
	starting int
	closing  bool
}

// interrupted reports whether runAll has begun.
func (c *cleanups) interrupted() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closing
}

// startWait bounds how long runAll waits for a start under way (a scenario comes up in about
// 10 s).
const startWait = 2 * time.Minute

// begin marks a start under way until the returned function is called (after the start has
// registered its teardown, or failed). Once runAll has begun, begin never returns: the
// process is on its way out, and nothing new may start.
func (c *cleanups) begin() (end func()) {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		select {}
	}
	c.starting++
	c.mu.Unlock()
	return sync.OnceFunc(func() {
		c.mu.Lock()
		c.starting--
		c.mu.Unlock()
	})
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

// runAll waits for the starts under way to end, then runs every registered teardown, the
// newest first, and unregisters them.
func (c *cleanups) runAll() {
	c.mu.Lock()
	c.closing = true
	for deadline := time.Now().Add(startWait); c.starting > 0 && time.Now().Before(deadline); {
		c.mu.Unlock()
		time.Sleep(50 * time.Millisecond)
		c.mu.Lock()
	}
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
