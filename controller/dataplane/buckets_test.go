package dataplane

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestSplitOf: the split read from a group the planner laid out is the layout's (every
// bucket to its backend, the same slots), in both modes and on both table sizes; a bucket of
// another layout is an error naming it.
func TestSplitOf(t *testing.T) {
	for _, mode := range []Mode{ModeConntrack, ModeStateless} {
		for _, ovs := range []OVSVersion{{}, {Major: 3, Minor: 1}} {
			svc := webService(mode)
			svc.Backends[2].MAC, svc.Backends[2].SwitchPort = mac("02:00:00:00:00:03"), 3
			opt := Options{OVS: ovs}
			g := Desired([]Service{svc}, opt).Groups[0]
			sp, err := SplitOf(svc, g, ovs)
			if err != nil {
				t.Fatalf("%s %v: %v", mode, ovs, err)
			}
			l := Layout(svc, opt)
			if sp.NHash != l.Table.NHash || sp.NHash == 0 {
				t.Fatalf("%s %v: table of %d slots, layout says %d", mode, ovs, sp.NHash, l.Table.NHash)
			}
			for k, lb := range l.Backends {
				if sp.Slots[lb.Index] != lb.Slots || sp.Planned(int(lb.Index)) != l.Realised(k) {
					t.Errorf("%s %v: backend %s has %d slots, layout %d", mode, ovs, lb.Name, sp.Slots[lb.Index], lb.Slots)
				}
			}
			for k, b := range g.Buckets {
				if want := bucketActions(svc, svc.Backends[sp.Backend[k]]); b.Actions != want {
					t.Errorf("%s %v: bucket %d mapped to backend %d, whose actions differ", mode, ovs, k, sp.Backend[k])
				}
			}
			bad := Group{ID: g.ID, Type: g.Type, Buckets: append(slices.Clone(g.Buckets), Bucket{Weight: 1, Actions: "\x00\x00\x00\x10"})}
			if _, err := SplitOf(svc, bad, ovs); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("bucket %d ", len(g.Buckets))) {
				t.Errorf("%s %v: foreign bucket: err %v", mode, ovs, err)
			}
		}
	}
}
