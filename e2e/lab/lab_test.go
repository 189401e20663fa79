package lab

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestNamesFitInterfaces(t *testing.T) {
	l, err := NewWithID(t.TempDir(), "a1b2", nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, want, wantErr string
	}{
		{"br0", "fwa1b2-br0", ""},
		{"client", "fwa1b2-client", ""},
		{"be_1", "fwa1b2-be_1", ""},
		{"toolongname", "", "interface names allow 15"},
		{"Caps", "", "want [a-z0-9]"},
		{"", "", "want [a-z0-9]"},
		{"a/b", "", "want [a-z0-9]"},
		{"br0", "", "already used"},
	}
	if _, err := l.claimName("cgroup", "br0"); err != nil {
		t.Errorf("cgroup named like a host/bridge refused: %v", err)
	}
	for _, c := range cases {
		got, err := l.claimName("host", c.name)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("claimName(%q) = %q, %v; want error %q", c.name, got, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want || len(got) > MaxIfName {
			t.Errorf("claimName(%q) = %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}

func TestNewRejectsBadID(t *testing.T) {
	for _, id := range []string{"", "ABC", "1234567", "a-b"} {
		if _, err := NewWithID(t.TempDir(), id, nil); err == nil {
			t.Errorf("NewWithID accepted id %q", id)
		}
	}
	l, err := New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.ID) != 4 || l.Prefix != "fw"+l.ID {
		t.Fatalf("New: id %q prefix %q, want 4 hex digits and fw+id", l.ID, l.Prefix)
	}
}

func TestCloseReverseOrderJoinedIdempotent(t *testing.T) {
	l, err := NewWithID(t.TempDir(), "t", nil)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for i := range 4 {
		name := fmt.Sprint(i)
		if err := l.onClose(name, func() error {
			order = append(order, name)
			if i%2 == 1 {
				return errors.New("boom " + name)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	err1 := l.Close()
	if got := strings.Join(order, ","); got != "3,2,1,0" {
		t.Fatalf("teardown order %s, want 3,2,1,0", got)
	}
	if err1 == nil || !strings.Contains(err1.Error(), "boom 3") || !strings.Contains(err1.Error(), "boom 1") {
		t.Fatalf("Close error %v, want both failures joined", err1)
	}
	if err2 := l.Close(); err2 != err1 || len(order) != 4 {
		t.Fatalf("second Close ran teardowns again or changed result: %v, order %v", err2, order)
	}
	if err := l.onClose("late", func() error { return nil }); err == nil {
		t.Fatal("onClose after Close accepted")
	}
	if _, err := l.claimName("host", "late"); err == nil {
		t.Fatal("claimName after Close accepted")
	}
}

func TestHostMAC(t *testing.T) {
	names := []string{"client", "be1", "be2", ""}
	seen := map[string]string{}
	for _, n := range names {
		m := HostMAC(n)
		if len(m) != 6 || m[0] != 0x02 {
			t.Errorf("HostMAC(%q) = %v: want 6 bytes, locally administered unicast", n, m)
		}
		if HostMAC(n).String() != m.String() {
			t.Errorf("HostMAC(%q) not deterministic", n)
		}
		if other, dup := seen[m.String()]; dup {
			t.Errorf("HostMAC(%q) == HostMAC(%q)", n, other)
		}
		seen[m.String()] = n
	}
}

func TestShellQuote(t *testing.T) {
	cases := map[string]string{
		"/sys/fs/cgroup/cpu/x/cgroup.procs": "'/sys/fs/cgroup/cpu/x/cgroup.procs'",
		"a'b":                               `'a'\''b'`,
	}
	for in, want := range cases {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

type fakeTB struct {
	logs []string
}

func (f *fakeTB) Helper()                   {}
func (f *fakeTB) Cleanup(func())            {}
func (f *fakeTB) Failed() bool              { return false }
func (f *fakeTB) Logf(s string, a ...any)   { f.logs = append(f.logs, fmt.Sprintf(s, a...)) }
func (f *fakeTB) Errorf(s string, a ...any) {}
func (f *fakeTB) Fatalf(s string, a ...any) {}
func (f *fakeTB) TempDir() string           { return "" }

func TestTBWriterSplitsLines(t *testing.T) {
	f := &fakeTB{}
	w := &tbWriter{t: f}
	for _, chunk := range []string{"one\ntw", "o\n", "three"} {
		if _, err := w.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(f.logs, "|"); got != "one|two" {
		t.Fatalf("logged %q, want one|two (partial line held back)", got)
	}
}
