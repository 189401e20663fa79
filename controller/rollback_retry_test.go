package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"flowweight/controller/history"
)

// TestRollbackRetriedAfterARefusal: a rollback the running controller refused, run again
// (after fixing what the refusal named), gets the controller's answer again; the watcher
// skipped it as "the same refused content again", and the command waited out -wait and said
// the controller did not apply it, as if it were not running.
func TestRollbackRetriedAfterARefusal(t *testing.T) {
	l := newLab(t)
	v1 := l.toml(t)
	if err := os.WriteFile(l.path, v1, 0o640); err != nil {
		t.Fatal(err)
	}
	b := l.watch(t)
	// Version 2 with capacity 7, which the running controller refuses (refuser), recorded as
	// if an older controller had applied it; version 3 runs.
	store := history.Store{Dir: history.DirFor(l.state)}
	refused, running := l.toml(t, capB("7")...), l.toml(t, capB("5")...)
	if _, _, err := store.Record(refused, "file changed", l.path, time.Now(), 5); err != nil {
		t.Fatal(err)
	}
	l.replaceFile(t, running)
	deadline := time.Now().Add(10 * time.Second)
	for capacityOfB(b) != 5 || l.newest(t).Number != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("capacity 5 not applied and recorded: capacity %v, newest %d", capacityOfB(b), l.newest(t).Number)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i := range 2 {
		code, stdout, stderr := l.rollback("-wait", "5s", "2")
		if code != 1 || !strings.Contains(stderr, "the controller refused version 2: api.read_timeout") || !strings.Contains(stderr, "is back as it was") {
			t.Errorf("rollback %d exited %d:\n%s%s", i+1, code, stdout, stderr)
		}
		// The operator's second try comes after the watcher has seen the file put back (a
		// change and its undoing within one debounce are no change to it).
		deadline := time.Now().Add(10 * time.Second)
		for p := l.seen.Load(); p == nil || !bytes.Equal(*p, running); p = l.seen.Load() {
			if time.Now().After(deadline) {
				t.Fatal("the watcher never saw the file put back")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if capacityOfB(b) != 5 {
		t.Errorf("capacity %v after refused rollbacks, want 5 still", capacityOfB(b))
	}
}
