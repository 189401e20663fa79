//go:build integration

package e2e

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"flowweight/e2e/scenario"
)

// TestRollbackRestoresSwitch runs `controller rollback` against the running controller on the
// real switch: a reload makes be1 four times stronger and the service stateless, and the
// switch's bucket weights and flows change; the rollback puts the previous configuration back
// through the ordinary reload, and the switch holds the previous weights and flows again.
// The static policy makes the weights a function of the configuration alone, so "the
// previous weights" is exact.
func TestRollbackRestoresSwitch(t *testing.T) {
	s := startScenario(t, scenario.Options{Net: 93, Weighting: map[string]string{"policy": `"static"`}})
	// settled waits until the switch holds weights that the controller applied and that
	// stay, and flows that stay, and returns them.
	settled := func(what string) (map[string]uint16, []string) {
		t.Helper()
		w := stableSync(t, s, 30*time.Second)
		var flows []string
		if _, err := waitFor(15*time.Second, func() error {
			a, err := s.Flows()
			if err != nil {
				return err
			}
			time.Sleep(time.Second)
			b, err := s.Flows()
			if err != nil {
				return err
			}
			if !slices.Equal(a, b) {
				return fmt.Errorf("flows still changing: %d then %d", len(a), len(b))
			}
			flows = b
			return nil
		}); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		t.Logf("%s: group weights %v, %d flows", what, w, len(flows))
		return w, flows
	}
	// Out of warm-up first: its ramp moves weights by less than the dead band at a time.
	waitWarmedUp(t, s, 30*time.Second)
	before, flowsBefore := settled("before")
	if len(before) != 3 || before["be1"] == 0 {
		t.Fatalf("the switch holds %v before the reload, want three weighted backends", before)
	}

	caps := s.Capacities()
	caps[0] *= 4
	if err := s.Reload(caps, "stateless"); err != nil {
		t.Fatal(err)
	}
	// holds waits until the switch's weights and flows satisfy ok.
	holds := func(bound time.Duration, ok func(w map[string]uint16, f []string) error) (time.Duration, error) {
		return waitFor(bound, func() error {
			w, err := s.GroupWeights()
			if err != nil {
				return err
			}
			f, err := s.Flows()
			if err != nil {
				return err
			}
			return ok(w, f)
		})
	}
	if _, err := holds(20*time.Second, func(w map[string]uint16, f []string) error {
		if w["be1"] <= before["be1"] || slices.Equal(f, flowsBefore) {
			return fmt.Errorf("be1 weight %d (was %d), flows changed %v", w["be1"], before["be1"], !slices.Equal(f, flowsBefore))
		}
		return nil
	}); err != nil {
		t.Fatalf("the reload did not reach the switch: %v", err)
	}
	mid, flowsMid := settled("after the reload")
	if mid["be1"] <= before["be1"] || slices.Equal(flowsMid, flowsBefore) {
		t.Fatalf("after the reload be1 has weight %d (before %d), flows changed: %v", mid["be1"], before["be1"], !slices.Equal(flowsMid, flowsBefore))
	}

	ctl := func(args ...string) string {
		t.Helper()
		args = append(args[:1:1], append([]string{"-state", s.StatePathOf(0)}, args[1:]...)...)
		out, err := exec.Command(s.Opts.Bins.Controller, args...).CombinedOutput()
		t.Logf("$ controller %s\n%s", strings.Join(args, " "), out)
		if err != nil {
			t.Fatalf("controller %s: %v", args[0], err)
		}
		return string(out)
	}
	out := ctl("history")
	if !strings.Contains(out, "start") || !strings.Contains(out, "web: mode conntrack→stateless, capacity be1 1→4") {
		t.Errorf("history does not show the start and the reload")
	}
	out = ctl("rollback", "-config", s.ConfigPath, "-wait", "20s")
	if !strings.Contains(out, "the controller applied version 1 as version 3 (rollback to version 1)") {
		t.Errorf("rollback did not report the applied version")
	}

	d, err := holds(30*time.Second, func(w map[string]uint16, f []string) error {
		if fmt.Sprint(w) != fmt.Sprint(before) || !slices.Equal(f, flowsBefore) {
			return fmt.Errorf("switch weights %v (before the reload %v), flows as before: %v", w, before, slices.Equal(f, flowsBefore))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the rollback did not restore the switch: %v", err)
	}
	figure(t, "rollback to the switch holding the previous weights and flows", "%v", d.Round(10*time.Millisecond))
	after, flowsAfter := settled("after the rollback")
	if fmt.Sprint(after) != fmt.Sprint(before) || !slices.Equal(flowsAfter, flowsBefore) {
		t.Errorf("after the rollback the switch settled on %v (before the reload %v); flows as before: %v", after, before, slices.Equal(flowsAfter, flowsBefore))
	}
	if out := ctl("history"); !strings.Contains(out, "rollback to version 1") || !strings.Contains(out, "web: mode stateless→conntrack, capacity be1 4→1") {
		t.Errorf("history does not show the rollback as version 3")
	}
}
