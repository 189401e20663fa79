package main

import (
	"strings"
	"testing"

	"flowweight/controller/balancer"
)

// TestPrintStatusShares: the status table shows each backend's slots and realised share next
// to its weight share, and says when no switch gives a slot table.
func TestPrintStatusShares(t *testing.T) {
	svc := balancer.ServiceView{Name: "web", VIP: "10.0.0.100", Port: 80, Mode: "conntrack", GroupID: 5, Total: 1000,
		SlotTable: 256, Backends: []balancer.BackendView{
			{Name: "a", AppliedWeight: 700, Share: 0.7, Slots: 179, RealisedShare: 179.0 / 256},
			{Name: "b", AppliedWeight: 300, Share: 0.3, Slots: 77, RealisedShare: 77.0 / 256},
		}}
	var out strings.Builder
	printStatus(&out, []balancer.ServiceView{svc})
	got := out.String()
	for _, want := range []string{"slots=256", "SLOTS", "REALISED", "179", "69.9%", "70.0%", "77", "30.1%"} {
		if !strings.Contains(got, want) {
			t.Errorf("status output lacks %q:\n%s", want, got)
		}
	}
	svc.SlotTable = 0
	out.Reset()
	printStatus(&out, []balancer.ServiceView{svc})
	if !strings.Contains(out.String(), "slots=none (no switch)") {
		t.Errorf("status without a switch:\n%s", out.String())
	}
}
