//go:build integration

package ofswitch

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"flowweight/controller/arp"
	"flowweight/controller/ofwire"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// arpResponder is the controller's ARP side as the binary will wire it: answer requests
// for the VIP through packet-out to the requester's port, learn backends from replies.
type arpResponder struct {
	*recHandler
	t   *testing.T
	vip netip.Addr

	mu      sync.Mutex
	answers int
	learnt  map[netip.Addr]learnt
}

type learnt struct {
	mac  net.HardwareAddr
	port uint32
}

func (r *arpResponder) PacketIn(sw *Switch, pi PacketIn) {
	lookup := func(a netip.Addr) (net.HardwareAddr, bool) {
		if a == r.vip {
			return arp.VIPMAC(a), true
		}
		return nil, false
	}
	reply, ok, err := arp.Reply(pi.Data, lookup)
	if err != nil {
		r.t.Errorf("packet-in on port %d: %v", pi.InPort, err)
		return
	}
	if ok {
		out := ofp.Actions{&ofp.ActionOutput{Port: ofp.PortNo(pi.InPort)}}
		if err := sw.PacketOut(context.Background(), uint32(ofp.PortController), out, reply); err != nil {
			r.t.Errorf("packet-out: %v", err)
		}
		r.mu.Lock()
		r.answers++
		r.mu.Unlock()
		return
	}
	if ip, mac, ok := arp.ParseReply(pi.Data); ok {
		r.mu.Lock()
		r.learnt[ip] = learnt{mac, pi.InPort}
		r.mu.Unlock()
	}
}

// netns is a host in its own network namespace on a veth whose other end is a bridge port.
type netns struct {
	name, hostIf, nsIf string
}

func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func addHost(t *testing.T, lab *ovsLab, addr string) netns {
	t.Helper()
	needBinaries(t, "ip", "ethtool")
	s := randHex(t, 3)
	n := netns{name: "fwns" + s, hostIf: "fwh" + s, nsIf: "fwn" + s}
	run(t, "ip", "netns", "add", n.name)
	t.Cleanup(func() {
		exec.Command("ip", "netns", "del", n.name).Run()
		exec.Command("ip", "link", "del", n.hostIf).Run() // gone with the namespace already, normally
	})
	run(t, "ip", "link", "add", n.hostIf, "type", "veth", "peer", "name", n.nsIf)
	run(t, "ip", "link", "set", n.nsIf, "netns", n.name)
	run(t, "ip", "-n", n.name, "addr", "add", addr, "dev", n.nsIf)
	run(t, "ip", "-n", n.name, "link", "set", "lo", "up")
	run(t, "ip", "-n", n.name, "link", "set", n.nsIf, "up")
	run(t, "ip", "link", "set", n.hostIf, "up")
	run(t, "ethtool", "-K", n.hostIf, "tx", "off")
	run(t, "ip", "netns", "exec", n.name, "ethtool", "-K", n.nsIf, "tx", "off")
	lab.vsctl("add-port", lab.bridge, n.hostIf)
	return n
}

// dial connects from inside the namespace (a locked thread moved there by setns(2); the
// thread dies with its goroutine rather than returning to the pool in the wrong namespace).
func (n netns) dial(addr string) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		f, err := os.Open("/run/netns/" + n.name)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		nr, ok := map[string]uintptr{"amd64": 308, "arm64": 268}[runtime.GOARCH] // setns(2); syscall lacks it on amd64
		if !ok {
			errc <- fmt.Errorf("setns: syscall number for %s not known to this test", runtime.GOARCH)
			return
		}
		if _, _, e := syscall.RawSyscall(nr, f.Fd(), syscall.CLONE_NEWNET, 0); e != 0 {
			errc <- fmt.Errorf("setns %s: %w", n.name, e)
			return
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		errc <- err
	}()
	return <-errc
}

func (n netns) mac(t *testing.T) net.HardwareAddr {
	t.Helper()
	ifc := run(t, "ip", "-n", n.name, "-o", "link", "show", n.nsIf)
	f := strings.Fields(ifc[strings.Index(ifc, "link/ether"):])
	mac, err := net.ParseMAC(f[1])
	if err != nil {
		t.Fatal(err)
	}
	return mac
}

// TestOVSARPResponder: a host in a namespace asks for the VIP; the switch sends the
// request to us (flow arp,arp_tpa=VIP → CONTROLLER), we answer by packet-out, and the
// host's neighbour table holds the VIP MAC although nothing answers ICMP for the VIP. Then
// we resolve the host by a flooded request and learn its MAC and port from its reply.
// goldenPacketIn is where FLOWWEIGHT_RECORD=1 writes the recorded PACKET_IN.
const goldenPacketIn = "../ofwire/testdata/ovs31-packetin-arp-request.hex"

func TestOVSARPResponder(t *testing.T) {
	vip := netip.MustParseAddr("10.77.0.100")
	h := &arpResponder{recHandler: newRecHandler(), t: t, vip: vip, learnt: map[netip.Addr]learnt{}}
	_, port := serverOnFreePort(t, h, Config{})
	rec := recordingProxy(t, port, of.TypePacketIn)
	lab := startOVSLab(t, rec.port)
	sw := h.waitFor(t, "connected", ovsConnect).sw
	host := addHost(t, lab, "10.77.0.2/24")
	hostPort, err := strconv.ParseUint(strings.TrimSpace(lab.vsctl("get", "interface", host.hostIf, "ofport")), 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	lab.ofctl("add-flow", "priority=100,arp,arp_tpa="+vip.String()+",actions=CONTROLLER:65535")
	lab.ofctl("add-flow", "priority=90,arp,arp_op=2,actions=CONTROLLER:65535")

	// No ping on the CI image: a TCP connect from inside the namespace makes the host's
	// kernel resolve the VIP the same way, and must fail as nothing serves the VIP here.
	if err := host.dial(vip.String() + ":80"); err == nil {
		t.Fatal("TCP connect to the VIP succeeded, but nothing should answer it")
	} else {
		t.Logf("connect to the VIP failed as expected: %v", err)
	}
	neigh := run(t, "ip", "-n", host.name, "neigh", "show", vip.String())
	if !strings.Contains(neigh, "lladdr "+arp.VIPMAC(vip).String()) {
		t.Fatalf("neighbour entry for the VIP is %q, want lladdr %v", neigh, arp.VIPMAC(vip))
	}
	h.mu.Lock()
	answers := h.answers
	h.mu.Unlock()
	if answers == 0 {
		t.Fatal("neighbour entry present but the responder answered nothing")
	}
	// Keep Open vSwitch's own PACKET_IN bytes as the golden input of the codec's
	// TestGoldenPacketIn (controller/ofwire).
	raw := rec.first()
	if raw == nil {
		t.Fatal("proxy saw no PACKET_IN")
	}
	if os.Getenv("FLOWWEIGHT_RECORD") != "" {
		if err := os.WriteFile(goldenPacketIn, []byte(hex.EncodeToString(raw)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("recorded %s (%d bytes)", goldenPacketIn, len(raw))
	}

	// Resolve the host: a broadcast request from the VIP, flooded by packet-out.
	req, err := arp.Request(arp.VIPMAC(vip), vip, netip.MustParseAddr("10.77.0.2"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sw.PacketOut(context.Background(), uint32(ofp.PortController), ofp.Actions{&ofp.ActionOutput{Port: ofp.PortFlood}}, req); err != nil {
		t.Fatal(err)
	}
	want := host.mac(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		h.mu.Lock()
		l, ok := h.learnt[netip.MustParseAddr("10.77.0.2")]
		h.mu.Unlock()
		if ok {
			if !bytes.Equal(l.mac, want) || uint64(l.port) != hostPort {
				t.Fatalf("learnt %v on port %d, want %v on port %d", l.mac, l.port, want, hostPort)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("host's ARP reply never learnt; flows:\n%s", lab.ofctl("dump-flows"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// recorder is a TCP proxy between Open vSwitch and our Server that keeps the first
// message of one type the switch sent, byte for byte.
type recorder struct {
	port int
	mu   sync.Mutex
	msg  []byte
}

func (r *recorder) first() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.msg
}

func recordingProxy(t *testing.T, serverPort int, want of.Type) *recorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{port: ln.Addr().(*net.TCPAddr).Port}
	var conns sync.WaitGroup
	t.Cleanup(func() { ln.Close(); conns.Wait() })
	go func() {
		for {
			sc, err := ln.Accept()
			if err != nil {
				return
			}
			cc, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", serverPort))
			if err != nil {
				sc.Close()
				continue
			}
			conns.Add(2)
			go func() { defer conns.Done(); io.Copy(sc, cc); sc.Close() }()
			go func() {
				defer conns.Done()
				defer cc.Close()
				for {
					f, err := ofwire.ReadFrame(sc)
					if err != nil {
						return
					}
					raw, _ := ofwire.EncodeMessage(f.Type, f.Xid, ofwire.RawBody(f.Body))
					raw[0] = f.Version
					if f.Type == want {
						r.mu.Lock()
						if r.msg == nil {
							r.msg = raw
						}
						r.mu.Unlock()
					}
					if _, err := cc.Write(raw); err != nil {
						return
					}
				}
			}()
		}
	}()
	return r
}
