package api

import (
	"context"
	"encoding/json"
	"errors"
	"flowweight/controller/view"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"flowweight/controller/balancer"
	"flowweight/controller/config"
	"flowweight/internal/report"
	"flowweight/internal/testutil"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

// running is an in-process controller with no switch: weights are still computed and
// "applied" (nothing to write them to), which is all the API shows.
type running struct {
	b    *balancer.Balancer
	srv  *Server
	url  string // http://127.0.0.1:PORT
	push net.Addr
}

// serve starts a Server for b on a fresh loopback port and returns it and its base URL; it
// is closed when the test ends.
func serve(t *testing.T, b Balancer, g prometheus.Gatherer, o Options) (*Server, string) {
	t.Helper()
	s, err := NewServer(b, g, o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, "http://" + ln.Addr().String()
}

// webService is the service every test here runs: web, backends small and big.
var webService = testutil.Fixture("testdata/web.toml")

func startController(t *testing.T, token string) *running {
	t.Helper()
	dir := t.TempDir()
	key := filepath.Join(dir, "push.key")
	if err := os.WriteFile(key, testKey, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("api-test.toml", []byte(fmt.Sprintf(`
[controller]
listen = "127.0.0.1:0"
update_period = "100ms"
[api]
listen = ""
[collector]
push_listen = "127.0.0.1:0"
key_file = %q
[weighting]
warmup = "0s"
`, key)+webService))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := balancer.NewMetrics()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	b, err := balancer.New(cfg, balancer.Options{Metrics: m, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx, func(_, push net.Addr) { ready <- push }) }()
	r := &running{b: b}
	r.srv, r.url = serve(t, b.View(), reg, Options{Token: token, Limits: LimitsFrom(config.Default().API), Registerer: reg})
	select {
	case r.push = <-ready:
	case err := <-done:
		t.Fatalf("controller did not start: %v", err)
	}
	t.Cleanup(func() {
		r.srv.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller: %v", err)
		}
	})
	return r
}

// report pushes one sealed report, as a probe would.
func (r *running) report(t *testing.T, seq uint64, id string, cpu, cores float64) {
	t.Helper()
	rep := report.Report{BackendID: id, BootNonce: 42, Seq: seq, Time: time.Now(), Interval: time.Second,
		Flags: report.FlagHealthOK, CPUUtil: cpu, CPUCount: cores, MemUtil: 0.3, MemBytes: 4 << 30, Conns: 3}
	if id == "big" { // a version-2 probe that knows its service; "small" reports no signals
		rep.Signals, rep.ServiceCPU = report.SignalServiceCPU, cpu/2
	}
	dgram, err := rep.AppendSeal(nil, testKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("udp", r.push.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(dgram); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// feed pushes reports until both backends are up with applied weights, bounded in time.
func (r *running) feed(t *testing.T) []view.ServiceView {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for seq := uint64(1); time.Now().Before(deadline); seq++ {
		r.report(t, seq, "small", 0.6, 1)
		r.report(t, seq, "big", 0.3, 4)
		var svcs []view.ServiceView
		get(t, r.url+"/api/v1/services", &svcs)
		b := svcs[0].Backends
		if b[0].State == "up" && b[1].State == "up" && b[0].AppliedWeight > 0 && b[1].AppliedWeight > 0 {
			return svcs
		}
		time.Sleep(50 * time.Millisecond) // reports arrive over a socket; wait for the next update period
	}
	t.Fatal("backends did not come up from pushed reports within 10 s")
	return nil
}

func TestServicesAPI(t *testing.T) {
	r := startController(t, "")
	svcs := r.feed(t)
	s := svcs[0]
	if s.Name != "web" || s.VIP != "10.0.0.100" || len(s.Backends) != 2 {
		t.Fatalf("service view %+v", s)
	}
	small, big := s.Backends[0], s.Backends[1]
	if int(small.AppliedWeight)+int(big.AppliedWeight) != s.Total {
		t.Fatalf("weights %d+%d != total %d", small.AppliedWeight, big.AppliedWeight, s.Total)
	}
	if big.AppliedWeight <= small.AppliedWeight {
		t.Fatalf("4-core backend at lower load got %d, 1-core busier one %d", big.AppliedWeight, small.AppliedWeight)
	}
	if small.Explanation.LS <= 0 || big.Explanation.C <= small.Explanation.C || small.LastReportAge < 0 {
		t.Fatalf("explanations %+v / %+v", small.Explanation, big.Explanation)
	}
	// Signals: present ones with their values, absent ones absent; the headroom policy says it
	// fell back because one backend lacks the service's own CPU.
	if big.Signals != "service_cpu" || big.ServiceCPU == nil || *big.ServiceCPU <= 0 || big.Explanation.Used != "service_cpu" {
		t.Fatalf("big's signals %q %v, used %q", big.Signals, big.ServiceCPU, big.Explanation.Used)
	}
	if small.Signals != "none" || small.ServiceCPU != nil || small.Explanation.Used != "cpu" {
		t.Fatalf("small's signals %q %v, used %q", small.Signals, small.ServiceCPU, small.Explanation.Used)
	}
	if s.Policy != "headroom" || !strings.Contains(s.PolicyFallback, "1 of 2") {
		t.Fatalf("policy %q, fallback %q", s.Policy, s.PolicyFallback)
	}
	var flat []view.BackendView
	get(t, r.url+"/api/v1/backends", &flat)
	var events []view.Event
	get(t, r.url+"/api/v1/events", &events)
	if len(flat) != 2 || len(events) == 0 {
		t.Fatalf("backends %d events %d", len(flat), len(events))
	}
	var sws []view.SwitchView
	get(t, r.url+"/api/v1/switches/sync", &sws)
	if sws == nil || len(sws) != 0 {
		t.Fatalf("switches/sync with no switch: %v, want an empty list", sws)
	}
}

func post(t *testing.T, url, token string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func TestDrainNeedsToken(t *testing.T) {
	const tok = "s3cret-0123456789abcdef"
	r := startController(t, tok)
	r.feed(t)
	for _, c := range []struct {
		path, token string
		want        int
	}{
		{"/api/v1/backends/small/drain", "", 401},
		{"/api/v1/backends/small/drain", "wrong", 401},
		{"/api/v1/backends/nope/drain", tok, 404},
		{"/api/v1/backends/small/drain", tok, 200},
	} {
		if got := post(t, r.url+c.path, c.token); got != c.want {
			t.Fatalf("POST %s token %q: %d, want %d", c.path, c.token, got, c.want)
		}
	}
	st, _ := r.b.Pool().Get("small")
	if st.Status.String() != "drained" || !st.OperatorDrain {
		t.Fatalf("after drain: %v", st.Status)
	}
	if post(t, r.url+"/api/v1/backends/small/undrain", tok) != 200 {
		t.Fatal("undrain")
	}
	if st, _ := r.b.Pool().Get("small"); st.OperatorDrain {
		t.Fatal("still drained")
	}
}

func TestMetricsParse(t *testing.T) {
	r := startController(t, "")
	r.feed(t)
	resp, err := http.Get(r.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics is not valid Prometheus text: %v", err)
	}
	for _, name := range []string{"flowweight_backend_load_ratio", "flowweight_backend_capacity_ratio", "flowweight_backend_adjusted_load_ratio",
		"flowweight_backend_weight_computed", "flowweight_backend_weight_applied", "flowweight_backend_state",
		"flowweight_push_reports_accepted_total", "flowweight_push_reports_rejected_total", "flowweight_backend_transitions_total"} {
		if fams[name] == nil {
			t.Errorf("metric %s missing", name)
		}
	}
	sum := 0.0
	for _, m := range fams["flowweight_backend_weight_applied"].GetMetric() {
		sum += m.GetGauge().GetValue()
	}
	if sum != 1000 {
		t.Errorf("applied weights sum to %v, want 1000", sum)
	}
	if v := fams["flowweight_push_reports_accepted_total"].GetMetric()[0].GetCounter().GetValue(); v < 2 {
		t.Errorf("accepted reports %v", v)
	}
	// The live count as reported (3 each), with its source, and its age.
	live := map[string]float64{}
	for _, m := range fams["flowweight_backend_live_connections"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		live[labels["backend"]+"/"+labels["source"]] = m.GetGauge().GetValue()
	}
	if live["small/probe"] != 3 || live["big/probe"] != 3 || len(live) != 2 {
		t.Errorf("flowweight_backend_live_connections %v, want 3 for small and big from the probe", live)
	}
	if f := fams["flowweight_backend_live_connections_age_seconds"]; f == nil || len(f.GetMetric()) != 2 || f.GetMetric()[0].GetGauge().GetValue() < 0 {
		t.Errorf("flowweight_backend_live_connections_age_seconds: %v", f)
	}
}
