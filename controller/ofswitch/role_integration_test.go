//go:build integration

package ofswitch

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"flowweight/e2e/lab"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// TestOVSControllerRoles checks the switch side of controller high availability on a real
// Open vSwitch: one bridge with two controllers (two Servers, A and B). The switch fences
// them by generation_id and by role: a stale generation is refused, a new MASTER demotes the
// old one (which hears of it by an ONF role status), and a SLAVE's writes are refused
// without touching the switch's groups.
func TestOVSControllerRoles(t *testing.T) {
	hA, hB := newRecHandler(), newRecHandler()
	srvA, portA := serverOnFreePort(t, hA, Config{})
	_, portB := serverOnFreePort(t, hB, Config{})
	l := lab.ForTest(t) // holds the host-wide switch lock for the test's life
	o, err := l.StartOVS()
	if err != nil {
		t.Fatal(err)
	}
	br, err := o.AddBridge("role", fmt.Sprintf("tcp:127.0.0.1:%d tcp:127.0.0.1:%d", portA, portB), "secure")
	if err != nil {
		t.Fatal(err)
	}
	a := hA.waitFor(t, "connected", 30*time.Second).sw
	b := hB.waitFor(t, "connected", 30*time.Second).sw
	if a.DatapathID() != br.DPID || b.DatapathID() != br.DPID {
		t.Fatalf("sessions of %x and %x, want both on bridge %x", a.DatapathID(), b.DatapathID(), br.DPID)
	}
	ctx := context.Background()
	for name, sw := range map[string]*Switch{"A": a, "B": b} {
		if r := sw.Role(); r.Role != ofp.ControllerRoleEqual {
			t.Fatalf("%s starts as %v, want EQUAL", name, r)
		}
	}

	mustRole := func(who string, sw *Switch, role ofp.ControllerRole, gen uint64) {
		t.Helper()
		rr, err := sw.RequestRole(ctx, role, gen)
		if err != nil {
			t.Fatalf("%s asks for %s generation %d: %v", who, RoleName(role), gen, err)
		}
		if want := (RoleReply{Role: role, GenerationID: gen}); rr != want || sw.Role() != want {
			t.Fatalf("%s asks for %s generation %d: reply %v, Role %v", who, RoleName(role), gen, rr, sw.Role())
		}
	}
	mustStale := func(who string, sw *Switch, role ofp.ControllerRole, gen uint64) {
		t.Helper()
		before := sw.Role()
		_, err := sw.RequestRole(ctx, role, gen)
		if !IsStale(err) {
			t.Fatalf("%s asks for %s with stale generation %d: %v, want OFPRRFC_STALE", who, RoleName(role), gen, err)
		}
		if sw.Role() != before {
			t.Fatalf("%s: a refused request changed Role %v -> %v", who, before, sw.Role())
		}
	}
	groups := func() string {
		t.Helper()
		out, err := br.DumpGroups()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	// A is elected first and installs a group.
	mustRole("A", a, ofp.ControllerRoleMaster, 5)
	if _, err := a.Apply(ctx, []Message{groupMod(ofp.GroupAdd, 1, 10, 20)}); err != nil {
		t.Fatalf("A as MASTER adds group 1: %v", err)
	}

	// B with an older generation is refused; with a newer one it takes over.
	mustStale("B", b, ofp.ControllerRoleMaster, 4)
	select { // A's own MASTER reply woke RoleChanged; only the demotion should from here
	case <-a.RoleChanged():
	default:
	}
	mustRole("B", b, ofp.ControllerRoleMaster, 6)

	// The switch demoted A and told it so.
	deadline := time.After(10 * time.Second)
	for a.Role() != (RoleReply{Role: ofp.ControllerRoleSlave, GenerationID: 6}) {
		select {
		case <-a.RoleChanged():
		case <-deadline:
			t.Fatalf("A's Role is %v 10s after B became MASTER, want SLAVE 6 from a role status", a.Role())
		}
	}
	if f := srvA.Stats().Faults; f[FaultIgnoredMessage] != 0 || f[FaultMalformedRoleStatus] != 0 {
		t.Errorf("A counted the role status as a fault: %v", f)
	}

	// A, now SLAVE, cannot write: group and flow mods are refused and the groups stay.
	before := groups()
	fm := Message{Type: of.TypeFlowMod, Desc: "flow priority 100 drop", Body: &ofp.FlowMod{
		Command: ofp.FlowAdd, Priority: 100, Buffer: ofp.NoBuffer, OutPort: ofp.PortAny, OutGroup: ofp.GroupAny,
		Match: ofp.Match{Type: ofp.MatchTypeXM}}}
	for _, m := range []Message{groupMod(ofp.GroupModify, 1, 1, 1), groupMod(ofp.GroupAdd, 2, 5), groupMod(ofp.GroupDelete, 1), fm} {
		_, err := a.Apply(ctx, []Message{m})
		if !IsSlave(err) {
			t.Fatalf("A as SLAVE applies %q: %v, want OFPBRC_IS_SLAVE", m.Desc, err)
		}
	}
	if after := groups(); after != before {
		t.Fatalf("a SLAVE's refused writes changed the groups:\nbefore\n%s\nafter\n%s", before, after)
	}
	if flows, err := br.DumpFlows(); err != nil || strings.Contains(flows, "priority=100") {
		t.Fatalf("a SLAVE's refused flow mod is on the switch (%v):\n%s", err, flows)
	}

	// B, MASTER, can.
	if _, err := b.Apply(ctx, []Message{groupMod(ofp.GroupModify, 1, 30, 40)}); err != nil {
		t.Fatalf("B as MASTER modifies group 1: %v", err)
	}
	if w, err := br.GroupWeights(1); err != nil || len(w) != 2 || w[0].Weight != 30 || w[1].Weight != 40 {
		t.Fatalf("group 1 after B's modify: %+v, %v; want weights 30, 40", w, err)
	}

	// A stays fenced: SLAVE or MASTER with its old generation is stale, and asking the
	// switch (NOCHANGE) confirms SLAVE.
	mustStale("A", a, ofp.ControllerRoleSlave, 5)
	mustStale("A", a, ofp.ControllerRoleMaster, 5)
	if rr, err := a.RequestRole(ctx, ofp.ControllerRoleNoChange, 0); err != nil || rr.Role != ofp.ControllerRoleSlave {
		t.Fatalf("A queries its role: %v, %v; want SLAVE", rr, err)
	}
	if a.Err() != nil || b.Err() != nil {
		t.Fatalf("a session ended: A %v, B %v", a.Err(), b.Err())
	}
}
