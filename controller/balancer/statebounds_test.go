package balancer

import (
	"os"
	"strings"
	"testing"
	"time"

	"flowweight/controller/ha"
	"flowweight/controller/state"
	"flowweight/internal/testutil"
)

// learnedOfBackend is the learned factor the books hold for backend i of the first service.
func learnedOfBackend(b *Balancer, i int) float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.services[0].books[i].learned
}

// TestStateFileLearnedBounded: a state file whose learned capacity is beyond what learning
// reaches (weighting.learn.max_factor, 8) does not hand it to the weights; the rest of the file
// (a drain, another backend's learning) is applied, and the log names the backend.
func TestStateFileLearnedBounded(t *testing.T) {
	r := newStateRig(t)
	doc := `{"version":1,"written":"2001-09-09T01:46:40Z","backends":{"a":{"service":"web","operator_drain":true,"learned_capacity":1000},"b":{"service":"web","learned_capacity":2}}}`
	if err := os.WriteFile(r.path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	b := r.start(r.cfg("a", "b"))
	if l := learnedOfBackend(b, 0); l != 0 {
		t.Fatalf("backend a starts with learned capacity %v from the file, beyond max_factor 8", l)
	}
	if l := learnedOfBackend(b, 1); l != 2 {
		t.Fatalf("backend b's learned capacity %v, want 2", l)
	}
	if !operatorDrained(t, b, "a") {
		t.Fatal("the drain beside the refused value was lost")
	}
	if log := r.log.String(); !strings.Contains(log, "learned capacity not applied") || !strings.Contains(log, `backends \"a\": learned capacity 1000`) {
		t.Fatalf("no warning naming the backend:\n%s", log)
	}
}

// TestStateFileStrictKeys: "OPERATOR_DRAIN":true beside "operator_drain":false was applied as
// drained (jq reads not drained); now the file is unusable as a whole, as any corrupt file.
func TestStateFileStrictKeys(t *testing.T) {
	r := newStateRig(t)
	doc := `{"version":1,"backends":{"a":{"service":"web","operator_drain":false,"OPERATOR_DRAIN":true}}}`
	if err := os.WriteFile(r.path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	b := r.start(r.cfg("a", "b"))
	if operatorDrained(t, b, "a") {
		t.Fatal(`"OPERATOR_DRAIN" was applied`)
	}
	if log := r.log.String(); !strings.Contains(log, "state file unusable") || !strings.Contains(log, "OPERATOR_DRAIN") {
		t.Fatalf("no warning naming the key:\n%s", log)
	}
}

// TestHALearnedFromEtcdBounded: the etcd state document goes through the same checks: at
// start and at a takeover, a learned capacity of 1000 (two identical backends got 990/10) is
// not adopted, while the other backend's value is.
func TestHALearnedFromEtcdBounded(t *testing.T) {
	docOf := func(a, b float64) []byte {
		d, err := state.Encode(&state.File{Version: state.Version, Backends: map[string]state.Backend{
			"a": {Service: "web", LearnedCapacity: a}, "b": {Service: "web", LearnedCapacity: b}}})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	e := newFakeElector()
	e.set(ha.Leadership{Term: 3, LeaderName: "other"})
	e.doc = docOf(1000, 2)
	b := startHA(t, e)
	if b.services[0].cfg.Backends[0].Name != "a" || b.services[0].cfg.Backends[1].Name != "b" {
		t.Fatalf("backends %+v", b.services[0].cfg.Backends)
	}
	if l0, l1 := learnedOfBackend(b, 0), learnedOfBackend(b, 1); l0 != 0 || l1 != 2 {
		t.Fatalf("at start: learned %v, %v; want 0 (not applied), 2", l0, l1)
	}
	e.mu.Lock()
	e.doc = docOf(1000, 3)
	e.mu.Unlock()
	e.set(ha.Leadership{Leader: true, Term: 4, LeaderName: "me", TTL: time.Second, ValidUntil: time.Now().Add(time.Hour)})
	testutil.Until(t, 10*time.Second, func() bool { return learnedOfBackend(b, 1) == 3 }, "b's learned capacity adopted")
	if l := learnedOfBackend(b, 0); l != 0 {
		t.Fatalf("at takeover: a's learned capacity %v adopted from etcd, beyond max_factor 8", l)
	}
}
