package dataplane

import (
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
// controller, has a pick flow per located backend (whatever its weight: a connection marked
// for it in the moment its weight fell still finds its way) and no flow to the group, and
// keeps the rest of conntrack mode as it is.
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
	if f := ct[KindDispatch]; len(f) != 1 || f[0].Priority != PriorityVIP || !strings.Contains(f[0].Match, reg0) {
		t.Fatalf("flows to the controller: %v", f)
	} else if acts, _ := actionsOf(t, f[0]); len(acts) != 1 || *acts[0].(*ofp.ActionOutput) != (ofp.ActionOutput{Port: ofp.PortController, MaxLen: ofp.ContentLenNoBuffer}) {
		t.Fatalf("flow to the controller acts %v", acts)
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
	if len(d.Flows) != len(plain.Flows)-1+3 || len(d.Groups) != len(plain.Groups) {
		t.Errorf("reactive: %d flows and %d groups; group dispatch %d and %d", len(d.Flows), len(d.Groups), len(plain.Flows), len(plain.Groups))
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
