package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"flowweight/e2e/scenario"
)

func TestHAProxyWeights(t *testing.T) {
	tests := []struct {
		caps []float64
		want []int
		ok   bool
	}{
		{[]float64{0.125, 0.25, 0.5}, []int{64, 128, 256}, true},
		{[]float64{1, 1, 1}, []int{256, 256, 256}, true},
		{[]float64{0.5, 0.5, 0.3}, []int{256, 256, 154}, true},
		{[]float64{0.001, 1}, []int{1, 256}, true}, // never 0: that would drain the server
		{[]float64{1, 0}, nil, false},
		{[]float64{-1, 1}, nil, false},
	}
	for _, tt := range tests {
		got, err := haproxyWeights(tt.caps)
		if (err == nil) != tt.ok || !slices.Equal(got, tt.want) {
			t.Errorf("haproxyWeights(%v) = %v, %v; want %v (ok %v)", tt.caps, got, err, tt.want, tt.ok)
		}
	}
}

func TestHAProxyConfig(t *testing.T) {
	servers := []haproxyServer{{"be1", "10.77.0.11:8080", 64, 0}, {"be2", "10.77.0.12:8080", 128, 0}, {"be3", "10.77.0.13:8080", 256, 0}}
	plain := []haproxyServer{{"be1", "10.77.0.11:8080", 0, 0}, {"be2", "10.77.0.12:8080", 0, 0}}
	tests := []struct {
		name    string
		listen  string
		servers []haproxyServer
		want    []string // lines the config must hold
		absent  []string
		errWith string // the error must name this
	}{
		{"weighted", "127.0.0.1:8402", servers, []string{
			"    mode tcp", "    balance leastconn", "    bind 127.0.0.1:8402", "    option httpchk GET /health",
			"    server be1 10.77.0.11:8080 " + haproxyCheck + " weight 64",
			"    server be3 10.77.0.13:8080 " + haproxyCheck + " weight 256"}, nil, ""},
		{"no weights", "127.0.0.1:8401", plain, []string{"    server be2 10.77.0.12:8080 " + haproxyCheck}, []string{"weight"}, ""},
		{"bad listen", "127.0.0.1", plain, nil, nil, "127.0.0.1"},
		{"no servers", "127.0.0.1:1", nil, nil, nil, "no servers"},
		{"bad server address", "127.0.0.1:1", []haproxyServer{{"be1", "10.77.0.11", 0, 0}}, nil, nil, "be1"},
		{"weight too large", "127.0.0.1:1", []haproxyServer{{"be9", "10.77.0.11:80", 257, 0}}, nil, nil, "be9"},
		{"name with a space", "127.0.0.1:1", []haproxyServer{{"be 1", "10.77.0.11:80", 1, 0}}, nil, nil, "be 1"},
		{"slowstart below a millisecond", "127.0.0.1:1", []haproxyServer{{"be2", "10.77.0.11:80", 1, time.Microsecond}}, nil, nil, "be2"},
		{"negative slowstart", "127.0.0.1:1", []haproxyServer{{"be3", "10.77.0.11:80", 1, -time.Second}}, nil, nil, "be3"},
		{"slowstart", "127.0.0.1:1", []haproxyServer{{"be4", "10.77.0.14:80", 2, time.Minute}}, []string{"    server be4 10.77.0.14:80 " + haproxyCheck + " weight 2 slowstart 60000ms"}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := haproxyConfig(tt.listen, tt.servers)
			if tt.errWith != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errWith) {
					t.Fatalf("err %v, want one naming %q", err, tt.errWith)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(got, "\n")
			for _, w := range tt.want {
				if !slices.Contains(lines, w) {
					t.Errorf("no line %q in\n%s", w, got)
				}
			}
			for _, a := range tt.absent {
				if strings.Contains(got, a) {
					t.Errorf("%q in\n%s", a, got)
				}
			}
			// HAProxy itself must accept it, when installed (-c only parses; nothing listens).
			if _, err := os.Stat(haproxyBin); err != nil {
				return
			}
			cfg := filepath.Join(t.TempDir(), "h.cfg")
			if err := os.WriteFile(cfg, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(haproxyBin, "-c", "-f", cfg).CombinedOutput(); err != nil {
				t.Errorf("haproxy -c: %v\n%s\n%s", err, out, got)
			}
		})
	}
}

func TestNextWork(t *testing.T) {
	ms := time.Millisecond
	us := time.Microsecond
	tests := []struct {
		name   string
		w1     int
		c1     time.Duration
		w2     int
		c2     time.Duration
		target time.Duration
		want   int
	}{
		{"proportional from one point", 20000, 500 * us, 0, 0, 2 * ms, 80000},
		// cost = 100 µs + 0.025 µs per round: 2 ms needs 76,000 rounds.
		{"on the line through two points", 20000, 600 * us, 80000, 2100 * us, 2 * ms, 76000},
		{"bounded below", 20000, 10 * ms, 0, 0, us, 1000},
		{"bounded above", 1000, 1 * us, 0, 0, time.Second, 10_000_000},
		{"a line that does not rise: proportional from the second point", 20000, 600 * us, 80000, 500 * us, 2 * ms, 320000},
	}
	for _, tt := range tests {
		if got := nextWork(tt.w1, tt.c1, tt.w2, tt.c2, tt.target); got != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestMedianOf(t *testing.T) {
	tests := []struct {
		xs   []float64
		want float64
	}{
		{nil, 0}, {[]float64{3}, 3}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2},
	}
	for _, tt := range tests {
		if got := medianOf(tt.xs); got != tt.want {
			t.Errorf("medianOf(%v) = %v, want %v", tt.xs, got, tt.want)
		}
	}
}

func TestParseQuotas(t *testing.T) {
	tests := []struct {
		in   string
		want []float64
		err  string
	}{
		{"0.125,0.25,0.5", []float64{0.125, 0.25, 0.5}, ""},
		{" 1, 2 ", []float64{1, 2}, ""},
		{"1", nil, "at least two"},
		{"1,x", nil, `"x"`},
		{"1,0", nil, `"0"`},
		{"1,65", nil, `"65"`},
	}
	for _, tt := range tests {
		got, err := parseQuotas(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("parseQuotas(%q): err %v, want one naming %s", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("parseQuotas(%q) = %v, %v", tt.in, got, err)
		}
	}
}

// TestSeedOf: every level and repetition the bench uses gets its own arrivals.
func TestSeedOf(t *testing.T) {
	seen := map[int64]string{}
	for _, lvl := range []float64{0.4, 0.5, 0.8, 0.95, 1.1} {
		for rep := range 20 {
			s := seedOf(lvl, rep)
			if prev, ok := seen[s]; ok {
				t.Fatalf("seed %d for %v #%d and %s", s, lvl, rep, prev)
			}
			seen[s] = "x"
		}
	}
}

func TestCountDowns(t *testing.T) {
	log := `[NOTICE]   (1) : haproxy version is 2.6.12
[WARNING]  (27013) : Server pool/be1 is DOWN, reason: Layer4 connection problem, info: "Connection refused", check duration: 0ms. 0 active and 0 backup servers left. 0 sessions active, 0 requeued, 0 remaining in queue.
<1>Server pool/be1 is DOWN, reason: Layer4 connection problem, info: "Connection refused", check duration: 0ms. 0 active and 0 backup servers left.
[ALERT]    (27013) : backend 'pool' has no server available!
[WARNING]  (27013) : Server pool/be1 is UP, reason: Layer7 check passed, code: 200, check duration: 1ms.
[WARNING]  (27013) : Server pool/be2 is DOWN, reason: Layer7 timeout, check duration: 501ms.
`
	tests := []struct {
		log  string
		want int
	}{{log, 2}, {"", 0}, {"[WARNING]  (1) : Server pool/be3 is UP\n", 0}}
	for _, tt := range tests {
		if got := countDowns(tt.log); got != tt.want {
			t.Errorf("countDowns = %d, want %d in\n%s", got, tt.want, tt.log)
		}
	}
}

func TestSplitAtDrop(t *testing.T) {
	s := time.Second
	ws := []scenario.Window{
		{Start: 0, Offered: 100, Errors: 3},
		{Start: 10 * s, Offered: 110, Errors: 7, P99All: 900 * time.Millisecond},
		{Start: 20 * s, Offered: 80, Errors: 1, P99All: 400 * time.Millisecond},
		{Start: 30 * s, Offered: 80, P99All: 60 * time.Millisecond},
	}
	tests := []struct {
		name            string
		ws              []scenario.Window
		drop            time.Duration
		failed, offered int
		after           time.Duration
		ok              bool
	}{
		{"overload of 20 s", ws, 20 * s, 10, 210, 400 * time.Millisecond, true},
		{"drop between windows' starts", ws, 15 * s, 10, 210, 400 * time.Millisecond, true},
		{"no window after the drop", ws[:2], 20 * s, 10, 210, 0, false},
		{"none", nil, 20 * s, 0, 0, 0, false},
	}
	for _, tt := range tests {
		f, o, a, ok := splitAtDrop(tt.ws, tt.drop)
		if f != tt.failed || o != tt.offered || ok != tt.ok || a.P99All != tt.after {
			t.Errorf("%s: %d failed of %d, after %v (ok %v); want %d of %d, %v (%v)", tt.name, f, o, a.P99All, ok, tt.failed, tt.offered, tt.after, tt.ok)
		}
	}
}

// TestRecovery: the overload's "the 80 % p99 again from" is the first whole second after the
// drop whose next window holds the 80 % figure, failures included.
func TestRecovery(t *testing.T) {
	const ms = time.Millisecond
	// One request every 10 ms over [0, 40 s): latency slow before slowUntil, 50 ms after;
	// the 600 ms from failedAt (if set) fail, 60 requests: more than 1 % of any window's.
	run := func(slowUntil, failedAt time.Duration) scenario.LoadResult {
		var r scenario.LoadResult
		for at := time.Duration(0); at < 40*time.Second; at += 10 * ms {
			q := scenario.Request{At: at, Latency: 50 * ms}
			if at < slowUntil {
				q.Latency = 500 * ms
			}
			q.Failed = failedAt != 0 && at >= failedAt && at < failedAt+600*ms
			r.Requests = append(r.Requests, q)
		}
		return r
	}
	tests := []struct {
		name       string
		res        scenario.LoadResult
		want       time.Duration
		ok         bool
		steady     time.Duration
		drop, wind time.Duration
	}{
		{"back at once", run(20*time.Second, 0), 0, true, 100 * ms, 20 * time.Second, 10 * time.Second},
		{"slow for 5.5 s: back from the 6th second", run(25500*ms, 0), 6 * time.Second, true, 100 * ms, 20 * time.Second, 10 * time.Second},
		{"slow to the end", run(40*time.Second, 0), 0, false, 100 * ms, 20 * time.Second, 10 * time.Second},
		{"failures around 30 s, in every window", run(20*time.Second, 29700*ms), 0, false, 100 * ms, 20 * time.Second, 10 * time.Second},
		{"the 80 % figure was itself slow", run(25*time.Second, 0), 0, true, 500 * ms, 20 * time.Second, 10 * time.Second},
	}
	for _, tt := range tests {
		got, ok := recovery(tt.res, tt.drop, tt.wind, 40*time.Second, tt.steady)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: %v %v, want %v %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}
