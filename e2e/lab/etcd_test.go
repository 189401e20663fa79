package lab

import (
	"errors"
	"testing"
)

// startEtcd starts an etcd in a test lab, skipping when etcd-server is missing.
func startEtcd(t *testing.T, opt EtcdOptions) *Etcd {
	t.Helper()
	l := ForTest(t)
	e, err := l.StartEtcd(opt)
	if errors.Is(err, ErrNoEtcd) {
		t.Skipf("%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestEtcdKillRestart starts one member, kills it by PID, and restarts it on
// the same data directory and port.
func TestEtcdKillRestart(t *testing.T) {
	e := startEtcd(t, EtcdOptions{})
	if len(e.Endpoints()) != 1 {
		t.Fatalf("endpoints %v", e.Endpoints())
	}
	pid := e.PID(0)
	if err := e.Kill(0); err != nil {
		t.Fatal(err)
	}
	if e.Healthy(0) == nil {
		t.Fatal("healthy after kill")
	}
	if err := e.Restart(0); err != nil {
		t.Fatal(err)
	}
	if e.PID(0) == pid || e.PID(0) == 0 {
		t.Fatalf("pid %d after restart, was %d", e.PID(0), pid)
	}
}

func TestEtcdRejectsMembers(t *testing.T) {
	l := ForTest(t)
	if _, err := l.StartEtcd(EtcdOptions{Members: 2}); err == nil {
		t.Fatal("2 members accepted")
	}
}
