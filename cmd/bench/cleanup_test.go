package main

import (
	"runtime"
	"slices"
	"testing"
)

func TestCleanups(t *testing.T) {
	var c cleanups
	var ran []string
	stopA := c.add(func() { ran = append(ran, "a") })
	_ = c.add(func() { ran = append(ran, "b") })
	stopC := c.add(func() { ran = append(ran, "c") })
	stopA() // a finished normally: not run again by runAll
	stopA()
	c.runAll() // c, then b: the newest first
	stopC()    // already run by runAll: not again
	c.runAll()
	if want := []string{"a", "c", "b"}; !slices.Equal(ran, want) {
		t.Fatalf("ran %v, want %v", ran, want)
	}
}

// TestCleanupsWaitForAStart: an interrupt during a start (nothing registered yet) waits for
// the start to register its teardown, and runs it.
func TestCleanupsWaitForAStart(t *testing.T) {
	var c cleanups
	ran := make(chan string, 1)
	end := c.begin()
	done := make(chan struct{})
	go func() { c.runAll(); close(done) }()
	for closing := false; !closing; { // until runAll has begun (and so is waiting)
		c.mu.Lock()
		closing = c.closing
		c.mu.Unlock()
		runtime.Gosched()
	}
	c.add(func() { ran <- "scenario" })
	end()
	<-done
	select {
	case got := <-ran:
		if got != "scenario" {
			t.Fatalf("ran %q", got)
		}
	default:
		t.Fatal("runAll returned without the teardown the start registered")
	}
}
