//go:build integration

package nx

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/netrack/openflow/ofp"
)

// ofpPrint decodes an OpenFlow message with Open vSwitch's own parser, the conformance oracle
// for our encoders. A missing ovs-ofctl fails the test: CI must have Open vSwitch.
func ofpPrint(t *testing.T, hexMsg string) string {
	t.Helper()
	bin, err := exec.LookPath("ovs-ofctl")
	if err != nil {
		t.Fatalf("ovs-ofctl not found (install openvswitch-switch): %v", err)
	}
	out, err := exec.Command(bin, "-O", "OpenFlow13", "ofp-print", hexMsg).CombinedOutput()
	if err != nil {
		t.Fatalf("ovs-ofctl ofp-print %s: %v\n%s", hexMsg, err, out)
	}
	if strings.Contains(string(out), "decode error") {
		t.Fatalf("ovs-ofctl could not decode %s:\n%s", hexMsg, out)
	}
	return string(out)
}

func TestOFPPrintActions(t *testing.T) {
	for _, tc := range actionCases {
		t.Run(tc.name, func(t *testing.T) {
			out := ofpPrint(t, groupModHex(t, tc.actions))
			if !strings.Contains(out, "bucket=weight:10,"+tc.ovs+"\n") {
				t.Fatalf("ovs-ofctl printed\n%s\nwant a bucket with %q", out, tc.ovs)
			}
		})
	}
}

func TestOFPPrintMatch(t *testing.T) {
	ipv4 := ofp.XM{Class: ofp.XMClassOpenflowBasic, Type: ofp.XMTypeEthType, Value: ofp.XMValue{0x08, 0x00}}
	out1 := &ofp.ActionOutput{Port: 1}
	cases := []struct {
		name   string
		fields []ofp.XM
		want   string
	}{
		{"new", []ofp.XM{CTStateMatch(CTNew|CTTrk, 0), ipv4}, "ct_state=+new+trk,ip actions=output:1"},
		{"est", []ofp.XM{CTStateMatch(CTEst|CTTrk, 0)}, "ct_state=+est+trk actions=output:1"},
		{"trk not inv", []ofp.XM{CTStateMatch(CTTrk, CTInv)}, "ct_state=-inv+trk actions=output:1"},
		{"zone", []ofp.XM{CTZoneMatch(7)}, "ct_zone=7 actions=output:1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := ofpPrint(t, flowModHex(t, tc.fields, ofp.Actions{out1}))
			if !strings.Contains(out, "priority=100,"+tc.want+"\n") {
				t.Fatalf("ovs-ofctl printed\n%s\nwant %q", out, tc.want)
			}
		})
	}
}
