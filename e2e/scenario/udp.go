package scenario

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// GroupWeightsOf is GroupWeights of another service's group (group_id).
func (s *Scenario) GroupWeightsOf(group uint32) (map[string]uint16, error) {
	buckets, err := s.Bridge.GroupWeights(group)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	ips := map[string]string{}
	for _, b := range s.Backends {
		ips[b.Name] = b.Host.Addr().String()
	}
	return BucketsByBackend(buckets, ips)
}

// ClientAddrs gives the client host n more addresses (host numbers 150 and up of the
// scenario's prefix, IPv4 or IPv6) and returns them. Open vSwitch's select group hashes a UDP flow by its addresses only (docs/design.md),
// so UDP flows from one client address all reach one backend: tests of UDP balancing send
// from several.
func (s *Scenario) ClientAddrs(n int) ([]netip.Addr, error) {
	if n < 1 || n > 50 {
		return nil, fmt.Errorf("scenario: client addresses: %d outside [1,50]", n)
	}
	out := make([]netip.Addr, n)
	for i := range out {
		out[i] = s.Opts.addr(150 + i)
		args := []string{"addr", "replace", s.Opts.prefix(150 + i).String(), "dev", "eth0"}
		if out[i].Is6() {
			args = append([]string{"-6"}, append(args, "nodad")...) // usable at once, as the lab's own
		}
		if _, err := s.Client.Run(context.Background(), "ip", args...); err != nil {
			return nil, fmt.Errorf("scenario: %w", err)
		}
	}
	return out, nil
}

// Spread sends n requests to the VIP's port from the client host, each on a new connection
// ("tcp": one HTTP GET) or a new socket ("udp": one datagram to a backendd -udp-port), and
// counts which backend answered each; request i is sent from from[i % len(from)] (nil: the
// client's own address). Requests that fail are returned as errors (at most 5 kept) and
// counted in failed. Bounded by n and by a 5 s timeout per request.
func (s *Scenario) Spread(ctx context.Context, network string, port, n int, from []netip.Addr) (per map[string]int, failed int, errs []error) {
	per = map[string]int{}
	addr := net.JoinHostPort(s.VIP.String(), strconv.Itoa(port))
	for i := range n {
		name, err := s.request(ctx, network, addr, "spread "+strconv.Itoa(i), pick(from, i))
		if err != nil {
			failed++
			if len(errs) < 5 {
				errs = append(errs, err)
			}
			continue
		}
		per[name]++
	}
	return per, failed, errs
}

// pick is from[i % len(from)], or the zero address for none.
func pick(from []netip.Addr, i int) netip.Addr {
	if len(from) == 0 {
		return netip.Addr{}
	}
	return from[i%len(from)]
}

// dial dials from the client host, from local unless it is the zero address.
func (s *Scenario) dial(ctx context.Context, network, addr string, local netip.Addr) (net.Conn, error) {
	if local.IsValid() {
		return s.Client.DialFrom(ctx, network, addr, local)
	}
	return s.Client.DialContext(ctx, network, addr)
}

func (s *Scenario) request(ctx context.Context, network, addr, payload string, local netip.Addr) (string, error) {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := s.dial(dctx, network, addr, local)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if network == "tcp" {
		return roundTrip(c, bufio.NewReader(c), s.VIP.String())
	}
	return udpRoundTrip(c, payload, 5*time.Second)
}

// udpRoundTrip sends payload and returns the name of the backend that echoed it back
// ("NAME PAYLOAD", backendd's UDP answer). Answers to earlier datagrams that arrive late
// are skipped; any other answer is an error.
func udpRoundTrip(c net.Conn, payload string, timeout time.Duration) (string, error) {
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte(payload)); err != nil {
		return "", err
	}
	buf := make([]byte, 512)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return "", err
		}
		name, got, ok := strings.Cut(string(buf[:n]), " ")
		if !ok {
			return "", fmt.Errorf("answer %q is not NAME PAYLOAD", buf[:n])
		}
		if got == payload {
			return name, nil
		}
	}
}

// UDPFlows are long UDP flows through the VIP: each one client socket (one source port, so
// one conntrack entry) sending a datagram every 100-200 ms and checking that every answer
// comes, within 2 s, from the backend that answered its first.
type UDPFlows struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	opened   int
	broken   []string
	requests int
	each     []int // answers per flow
	backend  map[string]int
}

// UDPFlows starts n flows to the VIP's UDP port from the client host (flow i from
// from[i % len(from)]; nil: the client's own address), kept until Stop or until maxDuration
// passes. It returns once each has had its first answer (or failed).
func (s *Scenario) UDPFlows(n, port int, maxDuration time.Duration, from []netip.Addr) (*UDPFlows, error) {
	if n <= 0 || port <= 0 || maxDuration <= 0 {
		return nil, fmt.Errorf("scenario: udp flows: n (%d), port (%d), maxDuration (%v) must be > 0", n, port, maxDuration)
	}
	ctx, cancel := context.WithTimeout(context.Background(), maxDuration)
	f := &UDPFlows{cancel: cancel, backend: map[string]int{}, each: make([]int, n)}
	addr := net.JoinHostPort(s.VIP.String(), strconv.Itoa(port))
	var ready sync.WaitGroup
	for i := range n {
		ready.Add(1)
		f.wg.Go(func() { f.run(ctx, s, i, addr, pick(from, i), ready.Done) })
	}
	ready.Wait()
	return f, nil
}

func (f *UDPFlows) fail(i int, why string, err error) {
	f.mu.Lock()
	f.broken = append(f.broken, fmt.Sprintf("flow %d: %s: %v", i, why, err))
	f.mu.Unlock()
}

func (f *UDPFlows) run(ctx context.Context, s *Scenario, i int, addr string, local netip.Addr, ready func()) {
	once := sync.OnceFunc(ready)
	defer once()
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	c, err := s.dial(dctx, "udp", addr, local)
	cancel()
	if err != nil {
		f.fail(i, "socket", err)
		return
	}
	defer c.Close()
	f.mu.Lock()
	f.opened++
	f.mu.Unlock()
	first := ""
	for seq := 0; ; seq++ {
		name, err := udpRoundTrip(c, fmt.Sprintf("flow %d seq %d", i, seq), 2*time.Second)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			f.fail(i, fmt.Sprintf("datagram %d", seq), err)
			return
		}
		if first == "" {
			first = name
			f.mu.Lock()
			f.backend[name]++
			f.mu.Unlock()
			once()
		} else if name != first {
			f.fail(i, "moved", fmt.Errorf("datagram %d answered by %s, the first by %s", seq, name, first))
			return
		}
		f.mu.Lock()
		f.requests++
		f.each[i]++
		f.mu.Unlock()
		t := time.NewTimer(100*time.Millisecond + rand.N(100*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// Status returns the counts so far without stopping (as LongConns).
func (f *UDPFlows) Status() LongConnsResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	per := map[string]int{}
	for k, v := range f.backend {
		per[k] = v
	}
	return LongConnsResult{Opened: f.opened, Broken: len(f.broken), Requests: f.requests, PerBackend: per, Reasons: slices.Clone(f.broken),
		Each: slices.Clone(f.each)}
}

// Stop ends every flow and returns the final counts.
func (f *UDPFlows) Stop() LongConnsResult {
	f.cancel()
	f.wg.Wait()
	return f.Status()
}

// SpreadUDPFromPorts sends one datagram on each of len(ports) new UDP flows from the client's
// own address to the VIP's port, flow i from source port ports[i] (distinct ports make
// distinct 5-tuples), workers at a time, and counts which backend answered each. A datagram
// unanswered within a second is sent again on the same socket (the same flow, so the same
// backend), at most three times; a flow still unanswered is failed (at most 5 errors kept).
// Bounded by len(ports) and by ctx.
//
// resends counts the datagrams sent again: each is one more first packet of its flow through
// the switch (a UDP flow is new until its answer passes).
func (s *Scenario) SpreadUDPFromPorts(ctx context.Context, port int, ports []uint16, workers int) (per map[string]int, failed, resends int, errs []error) {
	per = map[string]int{}
	addr := net.JoinHostPort(s.VIP.String(), strconv.Itoa(port))
	var mu sync.Mutex
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(1, workers) {
		wg.Go(func() {
			for i := range next {
				name, again, err := s.udpFlowFrom(ctx, addr, ports[i], fmt.Sprintf("flow %d", i))
				mu.Lock()
				resends += again
				if err != nil {
					failed++
					if len(errs) < 5 {
						errs = append(errs, err)
					}
				} else {
					per[name]++
				}
				mu.Unlock()
			}
		})
	}
	for i := range ports {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if ctx.Err() != nil {
		errs = append(errs, ctx.Err())
	}
	return per, failed, resends, errs
}

// udpFlowFrom sends payload from port src and returns who answered and how many times it
// was sent again.
func (s *Scenario) udpFlowFrom(ctx context.Context, addr string, src uint16, payload string) (string, int, error) {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := s.Client.DialFromPort(dctx, "udp", addr, src)
	if err != nil {
		return "", 0, err
	}
	defer c.Close()
	for try := 1; ; try++ {
		name, err := udpRoundTrip(c, payload, time.Second)
		if err == nil || try == 3 || ctx.Err() != nil {
			if err != nil {
				err = fmt.Errorf("udp flow from port %d: %w", src, err)
			}
			return name, try - 1, err
		}
	}
}
