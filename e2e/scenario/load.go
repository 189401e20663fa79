package scenario

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// LoadOptions bound a load run: it stops at MaxRequests issued, after Duration, or when ctx
// ends, whichever comes first. Both bounds are required.
type LoadOptions struct {
	Concurrency int           // parallel clients (Closed only); default 4
	Rate        float64       // requests per second over all clients; Closed: 0 is as fast as they go
	Duration    time.Duration // required, > 0; Poisson: arrivals stop then, open requests finish by Timeout
	MaxRequests int           // required, > 0
	Timeout     time.Duration // per request (Poisson: from its scheduled arrival); default 5s

	// Arrivals is Closed (the default) or Poisson; the fields below apply to Poisson only.
	Arrivals Arrivals
	// Seed seeds the arrival schedule: runs with the same seed offer the same arrivals.
	Seed int64
	// MaxInFlight caps the open requests; an arrival finding the cap full fails as
	// "overflow". Default 1024.
	MaxInFlight int
	// Phases are consecutive rates (a step, an overload and its end); empty: Rate for
	// Duration. Duration still bounds the whole run.
	Phases []Phase
	// Window > 0 adds LoadResult.Windows, a time series by scheduled arrival.
	Window time.Duration
	// SourceAddrs > 0 sends the connections from that many more client addresses
	// (ClientAddrs), in turn, instead of the client's own: one address opening hundreds of
	// connections a second reuses its 4-tuples within the switch's conntrack memory of them
	// (docs/benchmarks.md, "source-port reuse through conntrack"); real clients are many.
	SourceAddrs int

	// Target is the host:port the requests go to, from the client host, instead of the VIP
	// (VIP:VIPPort): another balancer in front of the same backends. Both modes.
	Target string
}

// LoadResult is what a load run saw.
type LoadResult struct {
	OK, Errors int
	PerBackend map[string]int // successful responses by the backend name in the body
	Elapsed    time.Duration
	P50, P90   time.Duration // latency of successful requests
	P99, Max   time.Duration
	ErrSamples []string       // the first few distinct errors
	ErrKinds   map[string]int // failed requests by ErrKind

	// P99All is the p99 over every request issued, a failed one ranking above every success:
	// what a client of the service sees. When the rank falls on a failure (more than 1 % of
	// requests failed) P99Failed is set and P99All is the timeout.
	P99All    time.Duration
	P99Failed bool

	// Poisson only: Offered is the arrivals due within the run's bounds (OK + Errors),
	// Overflow those refused at MaxInFlight (also in Errors, as ErrKinds["overflow"]),
	// MaxLag the latest the generator sent an arrival after its due time (latency includes
	// it), Windows the time series when LoadOptions.Window was set, and then Requests:
	// every arrival (in the order they ended), for the figures a fixed grid of windows
	// cannot give (Between, AnsweredAcross).
	Offered, Overflow int
	MaxLag            time.Duration
	Windows           []Window
	Requests          []Request
	timeout           time.Duration
}

// Request is one arrival of a Poisson run: its scheduled offset from the run's start and,
// when answered, its latency from then.
type Request struct {
	At, Latency time.Duration
	Failed      bool
}

// Between is the p99 of all (P99All, P99Failed) over the requests scheduled in [from, to),
// and how many there were: a window that starts where the caller needs it, not on the
// run's grid.
func (r LoadResult) Between(from, to time.Duration) (p99 time.Duration, failed bool, n int) {
	var lats []time.Duration
	errs := 0
	for _, q := range r.Requests {
		if q.At < from || q.At >= to {
			continue
		}
		n++
		if q.Failed {
			errs++
			continue
		}
		lats = append(lats, q.Latency)
	}
	p99, failed = p99All(lats, errs, r.timeout)
	return p99, failed, n
}

// AnsweredAcross counts the answered requests scheduled before t and answered after it: the
// work the clients were waiting for at t (a failed request's end is not known, so it is not
// counted).
func (r LoadResult) AnsweredAcross(t time.Duration) int {
	n := 0
	for _, q := range r.Requests {
		if q.At < t && !q.Failed && q.At+q.Latency > t {
			n++
		}
	}
	return n
}

// ErrKind names the cause of a failed request without its addresses and ports, so that
// failures can be counted by kind: the last clause of a net/http error ("connection reset by
// peer", "i/o timeout", "status 503").
func ErrKind(err error) string {
	msg := err.Error()
	if strings.Contains(msg, "Client.Timeout") || strings.Contains(msg, "deadline exceeded") {
		return "timeout"
	}
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		msg = msg[i+2:]
	}
	return msg
}

// ErrSummary is the failed requests by kind, most frequent first: "12 connection reset by
// peer, 3 timeout"; empty when none failed.
func (r LoadResult) ErrSummary() string {
	kinds := slices.Collect(maps.Keys(r.ErrKinds))
	slices.SortFunc(kinds, func(a, b string) int {
		if c := cmp.Compare(r.ErrKinds[b], r.ErrKinds[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%d %s", r.ErrKinds[k], k))
	}
	return strings.Join(parts, ", ")
}

// Share returns each backend's fraction of the successful requests.
func (r LoadResult) Share() map[string]float64 {
	out := map[string]float64{}
	for k, v := range r.PerBackend {
		out[k] = float64(v) / float64(max(r.OK, 1))
	}
	return out
}

func (r LoadResult) String() string {
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range r.PerBackend {
			if !yield(k) {
				return
			}
		}
	})
	var per []string
	for _, n := range names {
		per = append(per, fmt.Sprintf("%s=%d", n, r.PerBackend[n]))
	}
	return fmt.Sprintf("%d ok, %d errors in %v (%.1f req/s); %s; latency p50 %v p90 %v p99 %v max %v",
		r.OK, r.Errors, r.Elapsed.Round(time.Millisecond), float64(r.OK)/max(r.Elapsed.Seconds(), 1e-9),
		strings.Join(per, " "), r.P50, r.P90, r.P99, r.Max)
}

// Load sends GET / to the VIP (or o.Target) from the client host, each request on a new
// connection, and counts which backend answered (backendd's body is its name).
func (s *Scenario) Load(ctx context.Context, o LoadOptions) (LoadResult, error) {
	if o.Duration <= 0 || o.MaxRequests <= 0 {
		return LoadResult{}, fmt.Errorf("scenario: load: Duration (%v) and MaxRequests (%d) must both be > 0", o.Duration, o.MaxRequests)
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	target := net.JoinHostPort(s.VIP.String(), strconv.Itoa(VIPPort))
	if o.Target != "" {
		if _, _, err := net.SplitHostPort(o.Target); err != nil {
			return LoadResult{}, fmt.Errorf("scenario: load: Target %q: %w", o.Target, err)
		}
		target = o.Target
	}
	url := "http://" + target + "/"
	switch o.Arrivals {
	case Closed:
	case Poisson:
		// The request's context carries its deadline (scheduled arrival + Timeout); the
		// client's own timeout is only a backstop.
		clients := []*http.Client{s.Client.HTTPClient(2 * o.Timeout)}
		if o.SourceAddrs > 0 {
			addrs, err := s.ClientAddrs(o.SourceAddrs)
			if err != nil {
				return LoadResult{}, err
			}
			clients = clients[:0]
			for _, a := range addrs {
				clients = append(clients, s.Client.HTTPClientFrom(a, 2*o.Timeout))
			}
		}
		var next atomic.Uint64
		return openLoop(ctx, o, func(ctx context.Context) (string, error) {
			return get(ctx, clients[(next.Add(1)-1)%uint64(len(clients))], url)
		})
	default:
		return LoadResult{}, fmt.Errorf("scenario: load: Arrivals %d: want Closed or Poisson", o.Arrivals)
	}
	ctx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	client := s.Client.HTTPClient(o.Timeout)

	var tokens <-chan time.Time
	if o.Rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / o.Rate))
		defer t.Stop()
		tokens = t.C
	}
	var (
		issued atomic.Int64
		mu     sync.Mutex
		res    = LoadResult{PerBackend: map[string]int{}, ErrKinds: map[string]int{}}
		lats   []time.Duration
		seen   = map[string]bool{}
		wg     sync.WaitGroup
	)
	start := time.Now()
	for range o.Concurrency {
		wg.Go(func() {
			for ctx.Err() == nil && issued.Add(1) <= int64(o.MaxRequests) {
				if tokens != nil {
					select {
					case <-tokens:
					case <-ctx.Done():
						return
					}
				}
				t0 := time.Now()
				name, err := get(ctx, client, url)
				lat := time.Since(t0)
				if ctx.Err() != nil && err != nil {
					return // cut off by the deadline: not the system's error
				}
				mu.Lock()
				if err != nil {
					res.Errors++
					res.ErrKinds[ErrKind(err)]++
					msg := err.Error()
					if !seen[msg] && len(res.ErrSamples) < 5 {
						seen[msg] = true
						res.ErrSamples = append(res.ErrSamples, msg)
					}
				} else {
					res.OK++
					res.PerBackend[name]++
					lats = append(lats, lat)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	res.P99All, res.P99Failed = p99All(lats, res.Errors, o.Timeout)
	res.P50, res.P90, res.P99, res.Max = Percentile(lats, 0.5), Percentile(lats, 0.9), Percentile(lats, 0.99), Percentile(lats, 1)
	return res, nil
}

func get(ctx context.Context, c *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	res, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 256))
	if err != nil {
		return "", fmt.Errorf("GET %s: body: %w", url, err)
	}
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: status %d", url, res.StatusCode)
	}
	name := strings.TrimSpace(string(body))
	if name == "" {
		return "", fmt.Errorf("GET %s: empty body, want a backend name", url)
	}
	return name, nil
}

// p99All is the nearest-rank p99 of the successes' latencies and failed more requests that
// rank above them all; when the rank is a failure it returns timeout and true.
func p99All(lats []time.Duration, failed int, timeout time.Duration) (time.Duration, bool) {
	n := len(lats) + failed
	if n == 0 {
		return 0, false
	}
	i := min(max(int(0.99*float64(n)+0.999999)-1, 0), n-1)
	if i >= len(lats) {
		return timeout, true
	}
	s := slices.Clone(lats)
	slices.Sort(s)
	return s[i], false
}

// Percentile returns the q-quantile (nearest rank) of ds; 0 for none. It sorts ds.
func Percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(q*float64(len(ds))+0.999999) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

// LongConns are long-lived TCP connections through the VIP, each sending one small HTTP
// request per period on the same connection and checking the answer comes from the backend
// it first reached.
type LongConns struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	opened   int
	broken   []string // one line per broken connection: why
	requests int
	each     []int          // answers per connection
	backend  map[string]int // connections per backend
}

// LongConnsResult is the outcome once stopped.
type LongConnsResult struct {
	Opened, Broken, Requests int
	PerBackend               map[string]int
	Reasons                  []string
	// Each is the number of answers per connection (or flow), by index: a test that waits
	// until every entry has grown knows each one still works, not only most.
	Each []int
}

// AllGrew reports whether every connection has had at least n answers more than in before
// (an earlier Status of the same connections).
func (r LongConnsResult) AllGrew(before LongConnsResult, n int) error {
	for i := range r.Each {
		if i < len(before.Each) && r.Each[i] < before.Each[i]+n {
			return fmt.Errorf("connection %d: %d answers, %d before: want %d more (broken: %v)", i, r.Each[i], before.Each[i], n, r.Reasons)
		}
	}
	return nil
}

// LongConns opens n connections to the VIP from the client host and keeps them busy until
// Stop, or until maxDuration passes (the bound). It returns once all are open and answered
// once; connections that fail to open count as broken.
func (s *Scenario) LongConns(n int, period, maxDuration time.Duration) (*LongConns, error) {
	if n <= 0 || period <= 0 || maxDuration <= 0 {
		return nil, fmt.Errorf("scenario: long conns: n (%d), period (%v), maxDuration (%v) must be > 0", n, period, maxDuration)
	}
	ctx, cancel := context.WithTimeout(context.Background(), maxDuration)
	lc := &LongConns{cancel: cancel, backend: map[string]int{}, each: make([]int, n)}
	addr := net.JoinHostPort(s.VIP.String(), strconv.Itoa(VIPPort))
	var ready sync.WaitGroup
	for i := range n {
		ready.Add(1)
		lc.wg.Go(func() { lc.run(ctx, s, i, addr, period, ready.Done) })
	}
	ready.Wait()
	return lc, nil
}

func (lc *LongConns) fail(i int, why string, err error) {
	lc.mu.Lock()
	lc.broken = append(lc.broken, fmt.Sprintf("conn %d: %s: %v", i, why, err))
	lc.mu.Unlock()
}

func (lc *LongConns) run(ctx context.Context, s *Scenario, i int, addr string, period time.Duration, ready func()) {
	once := sync.OnceFunc(ready)
	defer once()
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	c, err := s.Client.DialContext(dctx, "tcp", addr)
	cancel()
	if err != nil {
		lc.fail(i, "dial", err)
		return
	}
	defer c.Close()
	lc.mu.Lock()
	lc.opened++
	lc.mu.Unlock()
	r := bufio.NewReader(c)
	first := ""
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		name, err := roundTrip(c, r, s.VIP.String())
		if err != nil {
			if ctx.Err() != nil {
				return // stopped while a request was in flight
			}
			lc.fail(i, "request", err)
			return
		}
		if first == "" {
			first = name
			lc.mu.Lock()
			lc.backend[name]++
			lc.mu.Unlock()
			once()
		} else if name != first {
			lc.fail(i, "moved", fmt.Errorf("answered by %s, first by %s", name, first))
			return
		}
		lc.mu.Lock()
		lc.requests++
		lc.each[i]++
		lc.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func roundTrip(c net.Conn, r *bufio.Reader, host string) (string, error) {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", host); err != nil {
		return "", err
	}
	res, err := http.ReadResponse(r, nil)
	if err != nil {
		return "", err
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, 256))
	res.Body.Close()
	if err != nil {
		return "", err
	}
	if res.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d", res.StatusCode)
	}
	if res.Close {
		return "", fmt.Errorf("server closed the connection (keep-alive off?)")
	}
	return strings.TrimSpace(string(body)), nil
}

// Status returns the counts so far without stopping.
func (lc *LongConns) Status() LongConnsResult {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	per := map[string]int{}
	for k, v := range lc.backend {
		per[k] = v
	}
	return LongConnsResult{Opened: lc.opened, Broken: len(lc.broken), Requests: lc.requests, PerBackend: per,
		Reasons: slices.Clone(lc.broken), Each: slices.Clone(lc.each)}
}

// Stop ends every connection and returns the final counts.
func (lc *LongConns) Stop() LongConnsResult {
	lc.cancel()
	lc.wg.Wait()
	return lc.Status()
}

// Get sends one GET to url with c and returns the answering backend's name (backendd's
// body), for tests that drive their own clients (Host.HTTPClientFrom).
func Get(ctx context.Context, c *http.Client, url string) (string, error) { return get(ctx, c, url) }
