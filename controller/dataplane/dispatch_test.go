package dataplane

import (
	"slices"
	"strings"
	"testing"

	"flowweight/controller/ofwire"

	"github.com/netrack/openflow/ofp"
)

func reactiveService() Service {
	s := webService(ModeConntrack)
	s.Dispatch = DispatchReactive
	return s
}

// TestDispatchDesired: a reactive service sends new connections with reg3 = 0 to the
// controller by a leased flow (hard timeout DispatchLease), has a pick flow per located
// backend (whatever its weight: a connection marked for it in the moment its weight fell
// still finds its way), a fallback to the group below the lease and no other flow to the
// group, and keeps the rest of conntrack mode as it is, without timeouts.
func TestDispatchDesired(t *testing.T) {
	d := Desired([]Service{reactiveService()}, DefaultOptions())
	ct := flowsIn(d, TableCT)
	if len(ct[KindNew]) != 0 {
		t.Errorf("a reactive service has a flow to its group: %v", ct[KindNew])
	}
	reg0, err := ofwire.EncodeFields([]ofp.XM{ofwire.RegMatch(regDispatch, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if f := ct[KindDispatch]; len(f) != 1 || f[0].Priority != PriorityVIP || !strings.Contains(f[0].Match, reg0) || f[0].HardTimeout != DispatchLease {
		t.Fatalf("flows to the controller: %v", f)
	} else if acts, _ := actionsOf(t, f[0]); len(acts) != 1 || *acts[0].(*ofp.ActionOutput) != (ofp.ActionOutput{Port: ofp.PortController, MaxLen: ofp.ContentLenNoBuffer}) {
		t.Fatalf("flow to the controller acts %v", acts)
	}
	// The fallback: the same new connections, whatever reg3 holds, to the group, below the
	// lease and with no timeout of its own.
	if f := ct[KindDispatchFallback]; len(f) != 1 || f[0].Priority != PriorityDispatchFallback || f[0].Priority >= PriorityVIP ||
		strings.Contains(f[0].Match, reg0) || f[0].HardTimeout != 0 || f[0].IdleTimeout != 0 {
		t.Fatalf("fallback flows: %v", f)
	} else if acts, _ := actionsOf(t, f[0]); len(acts) != 1 || *acts[0].(*ofp.ActionGroup) != (ofp.ActionGroup{Group: ofp.Group(reactiveService().GroupID)}) {
		t.Fatalf("fallback flow acts %v, want the service's group", acts)
	}
	for _, f := range d.Flows {
		if (f.HardTimeout != 0) != (f.Cookie == MakeCookie(reactiveService().Index, NoIndex, KindDispatch)) || f.IdleTimeout != 0 {
			t.Errorf("flow %v: only the flow to the controller holds a lease", f)
		}
	}
	picks := ct[KindDispatchPick]
	if len(picks) != 2 {
		t.Fatalf("pick flows %v: want one for each of the two located backends", picks)
	}
	for i, f := range picks {
		want, err := ofwire.EncodeFields([]ofp.XM{ofwire.RegMatch(regDispatch, uint32(i)+1)})
		if err != nil {
			t.Fatal(err)
		}
		if f.Priority != PriorityDispatchPick || !strings.Contains(f.Match, want) {
			t.Errorf("pick flow %d: %v", i, f)
		}
		acts, _ := actionsOf(t, f)
		b := reactiveService().Backends[i]
		if len(acts) != 1 || encodeActions(acts) != encodeActions(ofp.Actions{commitNAT(reactiveService(), b, TableForward)}) {
			t.Errorf("pick flow %d acts %v: want the commit to %s", i, acts, b.Name)
		}
	}
	// Everything else is conntrack mode's.
	plain := Desired([]Service{webService(ModeConntrack)}, DefaultOptions())
	if len(d.Flows) != len(plain.Flows)-1+4 || len(d.Groups) != len(plain.Groups) {
		t.Errorf("reactive: %d flows and %d groups; group dispatch %d and %d", len(d.Flows), len(d.Groups), len(plain.Flows), len(plain.Groups))
	}
}

// TestRenewals: the renewal of a reactive service's switch is the add of its leased flow
// alone, as planned (the add replaces it, which restarts its hard timeout); a switch with no
// lease renews nothing.
func TestRenewals(t *testing.T) {
	d := Desired([]Service{reactiveService(), webService(ModeConntrack)}, DefaultOptions())
	msgs := Renewals(d)
	if len(msgs) != 1 {
		t.Fatalf("%d renewals, want the one flow to the controller: %v", len(msgs), msgs)
	}
	fm, ok := msgs[0].Body.(*ofwire.FlowMod)
	if !ok || fm.Command != ofp.FlowAdd || fm.Flow.HardTimeout != DispatchLease || Kind(fm.Flow.Cookie&0xffff) != KindDispatch {
		t.Fatalf("renewal %+v: want an add of the flow to the controller", msgs[0])
	}
	if !slices.Contains(d.Flows, Flow(fm.Flow)) {
		t.Errorf("the renewal %v is not the planned flow", fm.Flow)
	}
	if r := Renewals(Desired([]Service{webService(ModeConntrack)}, DefaultOptions())); r != nil {
		t.Errorf("group dispatch renews %v", r)
	}
	// A flow of ours of another kind that holds a hard timeout (a switch read back after
	// someone edited it) is drift for the plan to repair, never a lease to keep alive.
	odd := Desired([]Service{webService(ModeConntrack)}, DefaultOptions())
	odd.Flows[0].HardTimeout = DispatchLease
	if r := Renewals(odd); r != nil {
		t.Errorf("a flow of kind %v with a hard timeout is renewed: %v", Kind(odd.Flows[0].Cookie&0xffff), r)
	}
}

// TestDispatchActions: the packet-out marks the frame for the backend (its index + 1, so 0
// stays "not chosen") and sends it through the tables from the start.
func TestDispatchActions(t *testing.T) {
	acts := DispatchActions(4)
	set, ok := acts[0].(*ofp.ActionSetField)
	out, ok2 := acts[1].(*ofp.ActionOutput)
	if len(acts) != 2 || !ok || !ok2 || set.Field.Class != ofp.XMClassNicira1 || set.Field.Type != ofp.XMType(regDispatch) ||
		string(set.Field.Value) != "\x00\x00\x00\x05" || out.Port != ofp.PortTable {
		t.Fatalf("DispatchActions(4) = %v", acts)
	}
}

func TestDispatchValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Service)
		want string // "" valid
	}{
		{"reactive", func(*Service) {}, ""},
		{"group", func(s *Service) { s.Dispatch = DispatchGroup }, ""},
		{"empty is group", func(s *Service) { s.Dispatch = "" }, ""},
		{"udp", func(s *Service) { s.Protocol = "udp" }, ""},
		{"stateless", func(s *Service) { s.Mode = ModeStateless }, `dispatch "reactive" needs mode "conntrack"`},
		{"affinity", func(s *Service) { s.AffinityTimeout = 5 }, `dispatch "reactive" needs mode "conntrack" without affinity`},
		{"unknown", func(s *Service) { s.Dispatch = "random" }, `dispatch "random" is neither "group" nor "reactive"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := reactiveService()
			tc.edit(&s)
			err := s.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate = %v, want %q", err, tc.want)
			}
		})
	}
}
