package main

import (
	"bytes"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"flowweight/controller/history"
)

// TestRollbackKeepsAnEditMadeWhileItWaits: a rollback that times out puts the file back only
// if the file still holds what it wrote. An operator's edit (or another rollback) made while
// it waited stays, and the command says the file was left as it is.
func TestRollbackKeepsAnEditMadeWhileItWaits(t *testing.T) {
	l := newLab(t)
	v1, v2, edit := l.toml(t), l.toml(t, capB("2")...), l.toml(t, capB("3")...)
	l.applied(t, v1, v2)
	edited := make(chan error, 1)
	go func() {
		// The operator's edit, once the rollback has written version 1.
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if got, _ := os.ReadFile(l.path); bytes.Equal(got, v1) {
				edited <- l.replaceFileErr(edit)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		edited <- os.ErrDeadlineExceeded
	}()
	code, stdout, stderr := l.rollback("-wait", "1s")
	if err := <-edited; err != nil {
		t.Fatalf("the rollback never wrote version 1: %v\n%s%s", err, stdout, stderr)
	}
	if code != 1 || !strings.Contains(stderr, "NOT put back") || !strings.Contains(stderr, "changed since the rollback read it") {
		t.Errorf("exit %d:\n%s%s", code, stdout, stderr)
	}
	if got, _ := os.ReadFile(l.path); !bytes.Equal(got, edit) {
		t.Errorf("the operator's edit was overwritten with:\n%s", got)
	}
	if _, err := os.Stat(history.RequestFor(l.state)); !os.IsNotExist(err) {
		t.Errorf("the request outlived the rollback: %v", err)
	}
}

// replaceFileErr is replaceFile for a goroutine other than the test's.
func (l *lab) replaceFileErr(data []byte) error {
	tmp := l.path + ".new"
	if err := os.WriteFile(tmp, data, 0o640); err != nil {
		return err
	}
	return os.Rename(tmp, l.path)
}

// TestRollbackRefusedWhileAnotherRuns: while another rollback holds the history's lock, a
// second one writes nothing and says so.
func TestRollbackRefusedWhileAnotherRuns(t *testing.T) {
	l := newLab(t)
	v1, v2 := l.toml(t), l.toml(t, capB("2")...)
	l.applied(t, v1, v2)
	d, err := os.Open(history.DirFor(l.state))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := l.rollback("-wait", "0")
	if code != 1 || !strings.Contains(stderr, "another rollback is running") || !strings.Contains(stderr, history.DirFor(l.state)) {
		t.Errorf("exit %d:\n%s%s", code, stdout, stderr)
	}
	if got, _ := os.ReadFile(l.path); !bytes.Equal(got, v2) {
		t.Errorf("the file changed under another rollback's lock:\n%s", got)
	}
	syscall.Flock(int(d.Fd()), syscall.LOCK_UN)
	if code, stdout, stderr := l.rollback("-wait", "0"); code != 0 {
		t.Errorf("after the lock was released: exit %d:\n%s%s", code, stdout, stderr)
	}
}
