package ofwire

import (
	"encoding/hex"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"

	"flowweight/controller/arp"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// goldenPacketIn is a PACKET_IN recorded from Open vSwitch 3.1 by TestOVSARPResponder
// (FLOWWEIGHT_RECORD=1 go test -tags integration -run TestOVSARPResponder ./controller/ofswitch): a namespace
// host's ARP request for VIP 10.77.0.100, sent by flow arp,arp_tpa=VIP → CONTROLLER:65535.
const goldenPacketIn = "testdata/ovs31-packetin-arp-request.hex"

func TestGoldenPacketIn(t *testing.T) {
	text, err := os.ReadFile(goldenPacketIn)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := hex.DecodeString(strings.TrimSpace(string(text)))
	if err != nil {
		t.Fatalf("%s: %v", goldenPacketIn, err)
	}
	f, err := ReadFrame(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatalf("%s: %v", goldenPacketIn, err)
	}
	if f.Version != Version13 || f.Type != of.TypePacketIn {
		t.Fatalf("%s is version %d %v, want a 1.3 PACKET_IN", goldenPacketIn, f.Version, f.Type)
	}
	pi, err := ParsePacketIn(f.Body)
	if err != nil {
		t.Fatalf("%s: %v", goldenPacketIn, err)
	}
	if pi.BufferID != ofp.NoBuffer || pi.Reason != ofp.PacketInReasonAction || pi.InPort == 0 || int(pi.TotalLen) != len(pi.Data) {
		t.Errorf("decoded %+v: want no buffer, reason action, a port, whole frame", pi)
	}
	vip := netip.MustParseAddr("10.77.0.100")
	reply, ok, err := arp.Reply(pi.Data, func(a netip.Addr) (net.HardwareAddr, bool) { return arp.VIPMAC(a), a == vip })
	if err != nil || !ok || reply == nil {
		t.Fatalf("the recorded frame is not answered as an ARP request for %v: ok=%v err=%v", vip, ok, err)
	}
}
