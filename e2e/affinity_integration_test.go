//go:build integration

package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"flowweight/controller/dataplane"
	"flowweight/e2e/scenario"
)

// affinityClients is how many client addresses the affinity test uses, from host 120 up.
const affinityClients = 20

// TestAffinityClientIP runs client affinity (affinity_timeout) through the real switch: 20
// client addresses in one namespace, each opening new TCP connections from its own address.
// Each client stays on one backend while it keeps connecting; clients are spread by the
// weights (reported: 20 clients are a coarse sample); read-back leaves the learned flows
// alone; after the timeout a client may land elsewhere; draining a backend moves its clients
// at once and leaves every other client where it was, though the drain reweights the group.
func TestAffinityClientIP(t *testing.T) {
	const timeout = 3 * time.Second
	s := startScenario(t, scenario.Options{Net: 43, Work: 200, AffinityTimeout: timeout,
		Weighting: map[string]string{"policy": `"static"`, "capacity": cpuOnly}})
	ctx := context.Background()

	var clients []netip.Addr
	for i := range affinityClients {
		a := netip.AddrFrom4([4]byte{10, 77, s.Opts.Net, byte(120 + i)})
		if err := s.Client.AddAddr(a); err != nil {
			t.Fatal(err)
		}
		clients = append(clients, a)
	}
	// No testReach: with affinity one client address reaches one backend.
	w := stableSync(t, s, 20*time.Second)
	if flows, err := s.Bridge.Ofctl("dump-flows", "--no-stats"); err == nil {
		t.Logf("flows with affinity on:\n%s", flows)
	}
	if groups, err := s.Bridge.DumpGroups(); err == nil {
		t.Logf("groups:\n%s", groups)
	}

	// Phase 1: 1,000 new connections from each client.
	first, seq1 := affinityRoundSeq(ctx, t, s, clients, 1000, 40*time.Second)
	unsettled, most := checkSettled(t, "phase 1", seq1)
	figure(t, "affinity: clients whose first connections went elsewhere before they stayed, phase 1", "%d of %d (at most %d connections each)", unsettled, affinityClients, most)
	pinned := map[netip.Addr]string{}
	perBackend := map[string]int{}
	minShare, off := 1.0, 0
	for _, c := range clients {
		name, n, total := modal(first[c])
		if total == 0 {
			t.Fatalf("client %v: no request succeeded", c)
		}
		pinned[c] = seq1[c][len(seq1[c])-1]
		perBackend[name]++
		minShare = min(minShare, float64(n)/float64(total))
		off += total - n
	}
	figure(t, "affinity: requests not on the client's backend, 20 clients x 1000 new connections", "%d of %d (lowest per-client share on its backend %.4f)",
		off, sumAll(first), minShare)
	reportClientSpread(t, "affinity: clients per backend vs weights", perBackend, w)
	// Clients finish phase 1 at different times (a client on a slow backend takes longer),
	// and the learned flow of one that finished early expires timeout after its last
	// connection, before the round ends. So every client connects once more, all at once,
	// and the flows are read right after: the state in which each client has a live flow.
	// (A client whose flow had expired may be placed anew: its flow names where it went now.)
	_, refresh := affinityRoundSeq(ctx, t, s, clients, 1, 5*time.Second)
	learned, err := learnedFlows(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("learned flows after phase 1:\n%s", strings.Join(learned.lines, "\n"))
	if len(learned.byClient) != affinityClients {
		t.Errorf("%d learned affinity flows in table 4, want one per client (%d)", len(learned.byClient), affinityClients)
	}
	for c, b := range learned.byClient {
		if seq := refresh[c]; len(seq) > 0 && b != seq[len(seq)-1] {
			t.Errorf("client %v: learned flow names %s, its last request went to %s", c, b, seq[len(seq)-1])
		}
	}
	// The run lasted several read-back periods: learned flows are no drift.
	if log := controllerLogText(t, s); strings.Contains(log, "drift detected") {
		t.Errorf("the controller took learned flows for drift:\n%s", grepLines(log, "drift"))
	}

	// Phase 2: quiet for longer than the timeout; the learned flows expire.
	if _, err := waitFor(timeout+10*time.Second, func() error {
		l, err := learnedFlows(s)
		if err != nil {
			return err
		}
		if n := len(l.byClient); n > 0 {
			return fmt.Errorf("%d learned flows left", n)
		}
		return nil
	}); err != nil {
		t.Fatalf("learned flows did not expire after the %v idle timeout: %v", timeout, err)
	}
	_, seq2 := affinityRoundSeq(ctx, t, s, clients, 100, 20*time.Second)
	unsettled, most = checkSettled(t, "after the timeout", seq2)
	figure(t, "affinity: clients whose first connections went elsewhere before they stayed, after the timeout", "%d of %d (at most %d connections each)", unsettled, affinityClients, most)
	moved := 0
	perBackend = map[string]int{}
	for _, c := range clients {
		name := seq2[c][len(seq2[c])-1]
		if name != pinned[c] {
			moved++
		}
		pinned[c] = name
		perBackend[name]++
	}
	figure(t, "affinity: clients on another backend after the timeout", "%d of %d", moved, affinityClients)
	reportClientSpread(t, "affinity: clients per backend vs weights, after the timeout", perBackend, w)
	if moved == 0 {
		// With these weights a client keeps its backend by chance with probability about
		// 0.45: all 20 keeping theirs is a one-in-10⁷ event, unless affinity outlived its timeout.
		t.Error("no client changed backend after its affinity expired")
	}

	// Phase 3: drain the backend with the most clients.
	var drained string
	for _, b := range slices.Sorted(maps.Keys(perBackend)) {
		if drained == "" || perBackend[b] > perBackend[drained] {
			drained = b
		}
	}
	if err := s.Drain(drained, true); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if _, err := waitFor(15*time.Second, func() error {
		g, err := s.GroupWeights()
		if err != nil {
			return err
		}
		if g[drained] != 0 {
			return fmt.Errorf("%s still has %d slots", drained, g[drained])
		}
		l, err := learnedFlows(s)
		if err != nil {
			return err
		}
		if n := l.perBackend[drained]; n > 0 {
			return fmt.Errorf("%d learned flows still name %s", n, drained)
		}
		return nil
	}); err != nil {
		t.Fatalf("drain of %s not applied: %v", drained, err)
	}
	t.Logf("drain of %s applied (bucket and learned flows gone) after %v", drained, time.Since(t0).Round(time.Millisecond))
	third, seq3 := affinityRoundSeq(ctx, t, s, clients, 50, 20*time.Second)
	unsettled, most = checkSettled(t, "after the drain", seq3)
	figure(t, "affinity: clients whose first connections went elsewhere before they stayed, after the drain", "%d of %d (at most %d connections each)", unsettled, affinityClients, most)
	movedDrained, kept := 0, 0
	for _, c := range clients {
		name := seq3[c][len(seq3[c])-1]
		if third[c][drained] > 0 {
			t.Errorf("client %v reached drained %s %d times after the drain", c, drained, third[c][drained])
		}
		if pinned[c] != drained && third[c][name] != len(seq3[c]) {
			t.Errorf("client %v of %s did not keep its backend across the drain's reweight: %v", c, pinned[c], compact(seq3[c]))
		}
		switch {
		case pinned[c] == drained:
			movedDrained++
		case name == pinned[c]:
			kept++
		default:
			t.Errorf("client %v of %s moved to %s when %s was drained", c, pinned[c], name, drained)
		}
	}
	figure(t, "affinity: drain", "%d clients of drained %s moved at once; %d of %d other clients kept their backend across the drain's reweight",
		movedDrained, drained, kept, affinityClients-perBackend[drained])
}

// affinityRound sends n requests from each client, each on a new connection, the clients in
// parallel and each one's requests one after another, within limit; it returns the answers
// per client per backend.
func affinityRound(ctx context.Context, t *testing.T, s *scenario.Scenario, clients []netip.Addr, n int, limit time.Duration) map[netip.Addr]map[string]int {
	counts, _ := affinityRoundSeq(ctx, t, s, clients, n, limit)
	return counts
}

// affinityRoundSeq is affinityRound that also returns each client's answers in order.
func affinityRoundSeq(ctx context.Context, t *testing.T, s *scenario.Scenario, clients []netip.Addr, n int, limit time.Duration) (map[netip.Addr]map[string]int, map[netip.Addr][]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	url := fmt.Sprintf("http://%s:%d/", s.VIP, scenario.VIPPort)
	out := map[netip.Addr]map[string]int{}
	seqs := map[netip.Addr][]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := 0
	var sample error
	t0 := time.Now()
	// Each client's goroutine writes only its own map and slice; the shared maps are filled
	// after Wait (a write to seqs from a goroutine raced with the loop adding the next client).
	got := make([]map[string]int, len(clients))
	seq := make([][]string, len(clients))
	for i, c := range clients {
		hc := s.Client.HTTPClientFrom(c, 5*time.Second)
		got[i] = map[string]int{}
		wg.Go(func() {
			for range n {
				if ctx.Err() != nil {
					return
				}
				name, err := scenario.Get(ctx, hc, url)
				if err != nil {
					mu.Lock()
					errs++
					sample = err
					mu.Unlock()
					continue
				}
				got[i][name]++
				seq[i] = append(seq[i], name)
			}
		})
	}
	wg.Wait()
	for i, c := range clients {
		out[c], seqs[c] = got[i], seq[i]
	}
	total := sumAll(out)
	t.Logf("round of %d x %d: %d answers, %d errors in %v (%v)", len(clients), n, total, errs, time.Since(t0).Round(time.Millisecond), sample)
	if total < len(clients)*n*99/100 {
		t.Fatalf("only %d of %d requests answered within %v (%d errors, e.g. %v)", total, len(clients)*n, limit, errs, sample)
	}
	return out, seqs
}

// settled is how many of a client's first answers differ from where it then stayed: the
// connections opened while the switch was still installing its learned flow (a datapath
// flow cached before the learn keeps sending new connections through the group until Open
// vSwitch revalidates it). -1 when the client never stayed: its answers alternate to the end.
func settled(seq []string) int {
	if len(seq) == 0 {
		return 0
	}
	last := seq[len(seq)-1]
	i := len(seq)
	for i > 0 && seq[i-1] == last {
		i--
	}
	if i > len(seq)/2 {
		return -1
	}
	return i
}

// maxSettle is the most first connections of a client the test lets go elsewhere before it
// stays (settled): measured 0 or 1; a broken affinity alternates to the end.
const maxSettle = 3

// checkSettled fails for a client that did not stay on one backend after its first
// connections, and returns how many clients needed any and the most first connections any
// needed, for the figures.
func checkSettled(t *testing.T, phase string, seqs map[netip.Addr][]string) (clients, most int) {
	t.Helper()
	for _, c := range slices.SortedFunc(maps.Keys(seqs), netip.Addr.Compare) {
		n := settled(seqs[c])
		if n < 0 || n > maxSettle {
			t.Errorf("%s: client %v did not stay on one backend after its first %d connections: %v", phase, c, maxSettle, compact(seqs[c]))
			continue
		}
		if n > 0 {
			clients++
			most = max(most, n)
		}
	}
	return clients, most
}

// compact renders a sequence of answers as runs: be1x3 be2x997.
func compact(seq []string) string {
	var parts []string
	for i := 0; i < len(seq); {
		j := i
		for j < len(seq) && seq[j] == seq[i] {
			j++
		}
		parts = append(parts, fmt.Sprintf("%sx%d", seq[i], j-i))
		i = j
	}
	return strings.Join(parts, " ")
}

func modal(m map[string]int) (name string, n, total int) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		total += m[k]
		if m[k] > n {
			name, n = k, m[k]
		}
	}
	return name, n, total
}

func sumAll(m map[netip.Addr]map[string]int) int {
	n := 0
	for _, per := range m {
		for _, v := range per {
			n += v
		}
	}
	return n
}

// reportClientSpread logs clients per backend against the weights' expectation, and the
// largest difference in clients.
func reportClientSpread(t *testing.T, name string, perBackend map[string]int, w map[string]uint16) {
	t.Helper()
	total := 0
	for _, v := range w {
		total += int(v)
	}
	var parts []string
	worst := 0.0
	for _, b := range slices.Sorted(maps.Keys(w)) {
		want := float64(affinityClients) * float64(w[b]) / float64(max(total, 1))
		parts = append(parts, fmt.Sprintf("%s %d (weights %.1f)", b, perBackend[b], want))
		worst = max(worst, abs(float64(perBackend[b])-want))
	}
	figure(t, name, "%s; largest error %.1f clients", strings.Join(parts, ", "), worst)
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// learned is table 4's learned flows as dump-flows shows them.
type learned struct {
	lines      []string
	byClient   map[netip.Addr]string // client → backend name (from the cookie)
	perBackend map[string]int
}

// learnedFlows reads the learned affinity flows (cookie kind dataplane.KindAffinity) off the switch. The
// backend index in the cookie is the backend's position: be1 is 0.
func learnedFlows(s *scenario.Scenario) (learned, error) {
	out, err := s.Bridge.Ofctl("dump-flows", "table=4")
	if err != nil {
		return learned{}, err
	}
	l := learned{byClient: map[netip.Addr]string{}, perBackend: map[string]int{}}
	for _, line := range strings.Split(out, "\n") {
		f := strings.TrimSpace(line)
		cookie := field(f, "cookie=")
		if cookie == "" {
			continue
		}
		c, err := strconv.ParseUint(strings.TrimPrefix(cookie, "0x"), 16, 64)
		if err != nil {
			return learned{}, fmt.Errorf("cookie %q: %v", cookie, err)
		}
		if _, _, kind, ok := dataplane.ParseCookie(c); !ok || kind != dataplane.KindAffinity {
			continue
		}
		src, err := netip.ParseAddr(field(f, "nw_src="))
		if err != nil {
			return learned{}, fmt.Errorf("learned flow %q: nw_src: %v", f, err)
		}
		b := fmt.Sprintf("be%d", (c>>16)&0xffff+1)
		l.lines = append(l.lines, f)
		l.byClient[src] = b
		l.perBackend[b]++
	}
	return l, nil
}

// field returns the value after key up to the next comma or space.
func field(line, key string) string {
	i := strings.Index(line, key)
	if i < 0 {
		return ""
	}
	v := line[i+len(key):]
	if j := strings.IndexAny(v, ", "); j >= 0 {
		v = v[:j]
	}
	return v
}

// controllerLogText is the controller's log as it stands (s.ControllerLog is its path).
func controllerLogText(t *testing.T, s *scenario.Scenario) string {
	t.Helper()
	b, err := os.ReadFile(s.ControllerLog())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func grepLines(text, word string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
