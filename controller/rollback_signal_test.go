//go:build unix

package main

import (
	"bytes"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRollbackInterruptedPutsTheFileBack: an interrupt while the command waits for the
// controller (Ctrl-C, SIGTERM, SIGHUP of a dropped session) puts the file back as a timeout does; it used to end the
// command and leave the file holding a version the controller had not applied, and might
// refuse.
func TestRollbackInterruptedPutsTheFileBack(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) { interruptRollback(t, sig) })
	}
}

func interruptRollback(t *testing.T, sig syscall.Signal) {
	l := newLab(t)
	v1, v2 := l.toml(t), l.toml(t, capB("2")...)
	l.applied(t, v1, v2)
	type result struct {
		code           int
		stdout, stderr string
	}
	done := make(chan result, 1)
	go func() {
		code, stdout, stderr := l.rollback("-wait", "60s")
		done <- result{code, stdout, stderr}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for got, _ := os.ReadFile(l.path); !bytes.Equal(got, v1); got, _ = os.ReadFile(l.path) {
		if time.Now().After(deadline) {
			t.Fatal("the rollback never wrote version 1")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := syscall.Kill(os.Getpid(), sig); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.code != 1 || !strings.Contains(r.stderr, "interrupted") || !strings.Contains(r.stderr, "is back as it was") {
			t.Errorf("exit %d:\n%s%s", r.code, r.stdout, r.stderr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the interrupt did not end the wait")
	}
	if got, _ := os.ReadFile(l.path); !bytes.Equal(got, v2) {
		t.Errorf("the file was not put back:\n%s", got)
	}
}
