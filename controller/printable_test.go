package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"flowweight/controller/history"
)

// TestCommandsPrintNoControlCharacters: what `history` and `rollback` print from files the
// controller's user can write (a version's source, a refusal the controller wrote back)
// reaches root's terminal with every escape sequence escaped or refused, never raw.
func TestCommandsPrintNoControlCharacters(t *testing.T) {
	const esc = "\x1b]0;owned\x07\x1b[2J"
	t.Run("history", func(t *testing.T) {
		l := newLab(t)
		l.applied(t, l.toml(t), l.toml(t, capB("2")...))
		bad := filepath.Join(history.DirFor(l.state), "00000003.json")
		e := history.NewEntry(3, l.toml(t), "SIGHUP"+esc, l.path, time.Now())
		data, err := json.Marshal(&e) // as a hostile writer would, past Encode's checks
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bad, data, 0o600); err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		code := historyCommand([]string{"-state", l.state}, &out, &errOut)
		if code != 0 || !strings.Contains(errOut.String(), "version 3 skipped") {
			t.Errorf("exit %d:\n%s%s", code, out.String(), errOut.String())
		}
		if all := out.String() + errOut.String(); strings.ContainsAny(all, "\x1b\x07") {
			t.Errorf("a control character printed raw: %q", all)
		}
	})
	t.Run("rollback refused", func(t *testing.T) {
		l := newLab(t)
		v1, v2 := l.toml(t), l.toml(t, capB("2")...)
		l.applied(t, v1, v2)
		done := make(chan error, 1)
		go func() {
			// The controller's refusal, once the rollback has written version 1.
			deadline := time.Now().Add(5 * time.Second)
			for time.Now().Before(deadline) {
				if got, _ := os.ReadFile(l.path); bytes.Equal(got, v1) {
					r := history.Request{Format: history.Format, Version: 1, SHA256: sha256Hex(v1), Expires: time.Now().Add(time.Hour), Refused: "bad " + esc + "\nsecond line"}
					data, err := history.EncodeRequest(&r)
					if err == nil {
						err = os.WriteFile(history.RequestFor(l.state), data, 0o644)
					}
					done <- err
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
			done <- os.ErrDeadlineExceeded
		}()
		code, stdout, stderr := l.rollback("-wait", "5s")
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if code != 1 || !strings.Contains(stderr, "the controller refused version 1: bad ") || !strings.Contains(stderr, "\nsecond line") {
			t.Errorf("exit %d:\n%s%s", code, stdout, stderr)
		}
		if strings.ContainsAny(stdout+stderr, "\x1b\x07") {
			t.Errorf("a control character printed raw: %q", stdout+stderr)
		}
	})
}
