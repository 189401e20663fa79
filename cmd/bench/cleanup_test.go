package main

import (
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
