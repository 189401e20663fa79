//go:build integration

package dataplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"flowweight/controller/ofwire"
	"flowweight/e2e/lab"

	"github.com/netrack/openflow/ofp"
)

// shareLab is a real Open vSwitch bridge with backend and client hosts (network namespaces)
// and one service planned by Desired for the switch's own version.
type shareLab struct {
	t        testing.TB
	br       *lab.Bridge
	o        *ofConn
	v        OVSVersion
	backends []*lab.Host
	clients  []*lab.Host
	accepted []atomic.Int64
	svc      Service
	current  State

	ovs *lab.OVS

	mu   sync.Mutex
	rng  *rand.Rand                 // source ports
	used map[*lab.Host]map[int]bool // source ports each client has used in this run
}

var (
	shareVIP    = netip.MustParseAddr("10.9.255.1")
	shareVIPMAC = net.HardwareAddr{2, 0, 0, 0, 0xff, 1}
)

// newShareLab starts the switch and nBackends + nClients hosts; every backend accepts on
// port 80 and counts its connections.
func newShareLab(t testing.TB, nBackends, nClients int) *shareLab {
	l := lab.ForTest(t)
	ovs, err := l.StartOVS()
	if err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	br, err := ovs.AddBridge("sh", fmt.Sprintf("ptcp:%d:127.0.0.1", port), "secure")
	if err != nil {
		t.Fatal(err)
	}
	// The test's bare OpenFlow connection answers echo requests only while it reads: no
	// inactivity probe, so a long traffic run does not cost it the connection.
	if _, err := ovs.Vsctl("set", "controller", br.Name, "inactivity_probe=0"); err != nil {
		t.Fatal(err)
	}
	s := &shareLab{t: t, br: br, ovs: ovs, accepted: make([]atomic.Int64, nBackends), used: map[*lab.Host]map[int]bool{}}
	s.o = (&ovsLab{t: t, port: port}).dial()
	desc, err := ofwire.ParseDesc(s.o.multipart(ofp.MultipartTypeDescription, nil))
	if err != nil {
		t.Fatal(err)
	}
	if s.v, err = SwitchVersion(desc.Hardware, desc.Software); err != nil {
		t.Fatal(err)
	}
	for i := range nBackends {
		h, err := br.AddHost(fmt.Sprintf("b%d", i), netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 9, 0, byte(10 + i)}), 16))
		if err != nil {
			t.Fatal(err)
		}
		s.backends = append(s.backends, h)
		ln, err := h.Listen("tcp", h.Addr().String()+":80")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				s.accepted[i].Add(1)
				// Echo until the client closes: short connections close at once, the long
				// ones of the reweight test are probed through it.
				go func() {
					defer c.Close()
					_, _ = io.Copy(c, c)
				}()
			}
		}()
	}
	for i := range nClients {
		h, err := br.AddHost(fmt.Sprintf("c%d", i), netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 9, 1, byte(10 + i)}), 16))
		if err != nil {
			t.Fatal(err)
		}
		// The VIP's MAC is answered by the controller's ARP responder in production; here
		// the clients know it statically.
		if _, err := h.Run(context.Background(), "ip", "neigh", "replace", shareVIP.String(), "lladdr", shareVIPMAC.String(),
			"dev", lab.HostIface, "nud", "permanent"); err != nil {
			t.Fatal(err)
		}
		s.clients = append(s.clients, h)
	}
	return s
}

// install plans the service with weights w in mode and brings the switch to it (KeepSlots
// against what the switch holds, as the controller does).
func (s *shareLab) install(mode Mode, w []uint16) GroupLayout { return s.installKeep(mode, w, true) }

// installKeep is install, with KeepSlots only when keep is set (the canonical layout else).
func (s *shareLab) installKeep(mode Mode, w []uint16, keep bool) GroupLayout {
	s.t.Helper()
	s.svc = Service{Name: "share", Index: 1, VIP: shareVIP, VIPMAC: shareVIPMAC, Protocol: "tcp", Port: 80,
		Mode: mode, GroupID: 1, Zone: 9}
	for i, h := range s.backends {
		var wi uint16
		if i < len(w) {
			wi = w[i]
		}
		s.svc.Backends = append(s.svc.Backends, Backend{Name: h.Name, Index: uint16(i), IP: h.Addr(), MAC: h.MAC,
			SwitchPort: h.OFPort, Weight: wi})
	}
	opt := Options{Normal: true, OVS: s.v}
	d := Desired([]Service{s.svc}, opt)
	if keep {
		d = KeepSlots(d, s.current)
	}
	if err := s.o.apply(Plan(d, s.current)); err != nil {
		s.t.Fatalf("applying the plan: %v", err)
	}
	s.current = d
	return Layout(s.svc, opt)
}

// dial connects client c to the VIP. With randomPorts (the default) the source
// port is drawn at random: real clients come from many
// addresses and ports, while one client's kernel hands out near-sequential ports, whose hashes
// are not a uniform sample of the slot table (FLOWWEIGHT_SHARE_PORTS=kernel measures that).
func (s *shareLab) dial(ctx context.Context, c *lab.Host) (net.Conn, error) {
	if os.Getenv("FLOWWEIGHT_SHARE_PORTS") == "kernel" {
		return c.DialContext(ctx, "tcp", shareVIP.String()+":80")
	}
	for {
		s.mu.Lock()
		if s.rng == nil {
			s.rng = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
		}
		// A port this client used before in the run is not drawn again: its 5-tuple may still
		// be in the switch's conntrack (closed, or in TIME_WAIT on the backend's side), and a
		// new SYN on it follows the old entry's NAT to the previous vector's backend. CI
		// measured that as a 3-point skew toward the vector before.
		used := s.used[c]
		if used == nil {
			used = map[int]bool{}
			s.used[c] = used
		}
		port := 1024 + s.rng.IntN(65536-1024)
		if used[port] && len(used) < (65536-1024)*9/10 {
			s.mu.Unlock()
			continue
		}
		used[port] = true
		s.mu.Unlock()
		conn, err := c.DialFromPort(ctx, "tcp", shareVIP.String()+":80", uint16(port))
		if errors.Is(err, syscall.EADDRINUSE) {
			// Held by a socket, or in TIME_WAIT from an earlier connection of this client
			// (so a 5-tuple is never reused while the switch's conntrack may remember it).
			continue
		}
		return conn, err
	}
}

// connect opens n new connections through the VIP, spread over the clients, each closed at
// once, and returns how many each backend accepted.
func (s *shareLab) connect(n int) ([]int64, int) {
	s.t.Helper()
	before := make([]int64, len(s.accepted))
	for i := range s.accepted {
		before[i] = s.accepted[i].Load()
	}
	var failed atomic.Int64
	var wg sync.WaitGroup
	var next atomic.Int64
	const perClient = 4
	for _, c := range s.clients {
		for range perClient {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(n) {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					conn, err := s.dial(ctx, c)
					cancel()
					if err != nil {
						if failed.Add(1) <= 3 {
							s.t.Logf("dial: %v", err)
						}
						continue
					}
					conn.Close()
				}
			}()
		}
	}
	wg.Wait()
	ok := int64(n) - failed.Load()
	got := make([]int64, len(s.accepted))
	var sum int64
	err := lab.Poll(10*time.Second, func() error {
		sum = 0
		for i := range s.accepted {
			got[i] = s.accepted[i].Load() - before[i]
			sum += got[i]
		}
		if sum < ok {
			return fmt.Errorf("backends accepted %d of %d connections", sum, ok)
		}
		return nil
	})
	// In stateless mode a handshake can complete against a stale socket (a 5-tuple an earlier
	// vector's backend still holds): the client counts it, no backend accepts it. Tolerated up
	// to one in a thousand, and reported.
	if err != nil && ok-sum > int64(n)/1000 {
		s.t.Fatal(err)
	} else if err != nil {
		s.t.Logf("%v (tolerated)", err)
	}
	return got, int(failed.Load())
}

func shareConns(t testing.TB, def int) int {
	if v := os.Getenv("FLOWWEIGHT_SHARE_CONNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 100 {
			t.Fatalf("FLOWWEIGHT_SHARE_CONNS=%q: want a number of connections >= 100", v)
		}
		return n
	}
	return def
}

// BenchmarkOVSRealisedShares sends new connections from several clients through a real Open
// vSwitch for each benchmark vector and reports every backend's realised share against its
// slot share (flagging more than 4 binomial standard deviations) and the slot share against
// the computed one (within one slot). FLOWWEIGHT_SHARE_CONNS sets the connections per vector
// (default 3000; docs/benchmarks.md uses 20000 and 100000); FLOWWEIGHT_SHARE_MODE=stateless
// measures that mode. Run it alone, once, on a quiet machine:
//
//	go test -tags integration -run '^$' -bench OVSRealisedShares -benchtime 1x ./controller/dataplane
//
// It is a benchmark, not a test of the suite: the realised split is a quality figure, and
// under CPU contention (the suite's other processes) the small backends measured 1–2 points
// above their slot share, beyond sampling error (docs/benchmarks.md). That the switch builds
// exactly the slot table the layout asks for is TestOVSSlotTableMatchesModel's check, from
// the switch's own log.
func BenchmarkOVSRealisedShares(b *testing.B) {
	var t testing.TB = b
	n := shareConns(t, 3000)
	mode := ModeConntrack
	if os.Getenv("FLOWWEIGHT_SHARE_MODE") == string(ModeStateless) {
		mode = ModeStateless
	}
	vectors := benchVectors()
	if only := os.Getenv("FLOWWEIGHT_SHARE_VECTORS"); only != "" {
		var keep []benchVector
		for _, v := range vectors {
			if strings.Contains(","+only+",", ","+v.name+",") {
				keep = append(keep, v)
			}
		}
		vectors = keep
	}
	most := 0
	for _, v := range vectors {
		most = max(most, len(v.weights))
	}
	s := newShareLab(t, most, 8)
	t.Logf("Open vSwitch %v, %s mode, %d connections per vector from %d clients", s.v, mode, n, len(s.clients))
	for _, vec := range vectors {
		// Each vector starts with an empty conntrack, so its connections meet only its own
		// layout (a long run reuses 5-tuples once the ports are drawn out).
		if out, err := s.ovs.Appctl("dpctl/flush-conntrack"); err != nil {
			t.Fatalf("flushing conntrack: %v: %s", err, out)
		}
		lay := s.install(mode, vec.weights)
		start := time.Now()
		got, failed := s.connect(n)
		took := time.Since(start)
		total := 0.0
		for _, g := range got {
			total += float64(g)
		}
		worst, worstSlot := 0.0, 0.0
		var line []string
		for i, b := range lay.Backends {
			real := float64(got[i]) / total
			slot, comp := lay.Realised(i), lay.Computed(i)
			sd := math.Sqrt(slot * (1 - slot) / total)
			if math.Abs(real-slot) > 4*sd+1e-9 {
				t.Errorf("%s: backend %s realised %.2f%% of %d connections, slot share %.2f%% (4 sd = %.2f points)",
					vec.name, b.Name, 100*real, int(total), 100*slot, 400*sd)
			}
			if math.Abs(slot-comp) >= 1/float64(lay.N) {
				t.Errorf("%s: backend %s slot share %.3f%%, computed %.3f%%: more than one slot apart", vec.name, b.Name, 100*slot, 100*comp)
			}
			worst = max(worst, math.Abs(real-comp))
			worstSlot = max(worstSlot, math.Abs(slot-comp))
			if len(lay.Backends) <= 10 {
				line = append(line, fmt.Sprintf("%.1f/%.1f", 100*comp, 100*real))
			}
		}
		if failed > n/100 {
			t.Errorf("%s: %d of %d connections failed", vec.name, failed, n)
		}
		t.Logf("RESULT %s: %d ok, %d failed, %v; computed/realised %% %s; worst |realised-computed| %.2f pt (slot layout %.2f pt)",
			vec.name, int(total), failed, took.Round(100*time.Millisecond), strings.Join(line, " "), 100*worst, 100*worstSlot)
	}
}

// openLong opens n connections through the VIP and checks each answers an echo.
func (s *shareLab) openLong(n int) []net.Conn {
	s.t.Helper()
	var conns []net.Conn
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := s.dial(ctx, s.clients[i%len(s.clients)])
		cancel()
		if err != nil {
			s.t.Fatalf("long connection %d: %v", i, err)
		}
		s.t.Cleanup(func() { c.Close() })
		if !echoes(c) {
			s.t.Fatalf("long connection %d does not echo", i)
		}
		conns = append(conns, c)
	}
	return conns
}

// echoes reports whether one round trip still works on c: a connection moved to another
// backend meets a reset (stateless mode) instead.
func echoes(c net.Conn) bool {
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return false
	}
	buf := make([]byte, 5)
	_, err := io.ReadFull(c, buf)
	return err == nil && string(buf) == "ping\n"
}

// TestOVSStatelessReweightMovesFewSlots: in stateless mode a reweight breaks the connections
// whose slots change backend. 60:30:10 -> 50:30:20 moves 10% of the share (26 of 256 slots,
// from the first backend to the third); KeepSlots rewrites only those slots, so about 10% of
// 100 long connections (FLOWWEIGHT_MOVE_CONNS) break. Without it (the canonical layout, slots in backend order) the
// middle backend's slots shift too and about twice as many break: the second subtest measures
// that, as the figure the first is compared with.
func TestOVSStatelessReweightMovesFewSlots(t *testing.T) {
	n := 100
	if v := os.Getenv("FLOWWEIGHT_MOVE_CONNS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 100 {
			t.Fatalf("FLOWWEIGHT_MOVE_CONNS=%q: want a number of connections >= 100", v)
		}
	}
	before, after := []uint16{600, 300, 100}, []uint16{500, 300, 200}
	s := newShareLab(t, 3, 4)
	for _, keep := range []bool{true, false} {
		s.current = s.o.readBack()
		s.installKeep(ModeStateless, before, keep)
		// The datapath may still cache the previous layout's flows for a moment after the
		// barrier: a connection opened then starts on one backend and goes on to another.
		// The setup's layout must be the one the connections see (the reweight below is the
		// disruption measured, stale flows and all).
		if _, err := s.ovs.Appctl("revalidator/purge"); err != nil {
			t.Fatal(err)
		}
		conns := s.openLong(n)
		held := s.current
		s.installKeep(ModeStateless, after, keep)
		d := s.current
		moved := 0
		for i, b := range d.Groups[0].Buckets {
			if b != held.Groups[0].Buckets[i] {
				moved++
			}
		}
		broken := 0
		for _, c := range conns {
			if !echoes(c) {
				broken++
			}
			c.Close()
		}
		t.Logf("RESULT stateless reweight %v -> %v, KeepSlots=%v: %d of 256 slots moved (%.1f%%), %d of %d long connections broken",
			before, after, keep, moved, 100*float64(moved)/256, broken, n)
		if keep {
			if moved != 26 {
				t.Errorf("KeepSlots moved %d slots, want the 26 that must move", moved)
			}
			// 10.2 % of n expected; fail beyond 4 binomial standard deviations above it.
			if p := 26.0 / 256; float64(broken) > p*float64(n)+4*math.Sqrt(p*(1-p)*float64(n)) {
				t.Errorf("%d of %d connections broken for a 10%% share move", broken, n)
			}
		}
	}
}
