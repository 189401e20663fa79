package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"flowweight/e2e/lab"
)

// Service is the part of the controller's /api/v1/services entry the scenario reads.
type Service struct {
	Name     string `json:"name"`
	Mode     string `json:"mode"`
	Dispatch string `json:"dispatch"`
	GroupID  int    `json:"group_id"`
	Policy   string `json:"policy"`
	// PolicyFallback says why the headroom policy ran as 1/AL in the latest update (a live
	// backend's report without service_cpu); empty when it did not.
	PolicyFallback string `json:"policy_fallback"`
	// ShadowPolicy is the service's shadow_policy, empty without one.
	ShadowPolicy string `json:"shadow_policy"`
	// CanaryDatapaths are the switches holding the shadow policy's weights.
	CanaryDatapaths []string      `json:"canary_datapaths"`
	Panic           bool          `json:"panic"`
	Total           int           `json:"total"`
	Backends        []BackendView `json:"backends"`
}

// BackendView is one backend as the API reports it.
type BackendView struct {
	Name           string   `json:"name"`
	IP             string   `json:"ip"`
	State          string   `json:"state"`
	CPU            float64  `json:"cpu"`
	CPUCount       float64  `json:"cpu_count"`
	LastReportAge  float64  `json:"last_report_age_seconds"`
	Health         string   `json:"health"`
	Slow           bool     `json:"slow"`
	OperatorDrain  bool     `json:"operator_drain"`
	ComputedWeight uint16   `json:"computed_weight"`
	AppliedWeight  uint16   `json:"applied_weight"`
	BaseWeight     uint16   `json:"base_weight"`
	Followed       bool     `json:"followed"`
	InFlight       *float64 `json:"in_flight"`
	// Dispatched and DispatchInFlight: reactive dispatch's count of connections sent and
	// its estimate of work in flight at its last choice.
	Dispatched       *uint64  `json:"dispatched"`
	DispatchInFlight *float64 `json:"dispatch_in_flight"`
	// Connections is the latest connection count as reported (nil: none yet).
	Connections *float64    `json:"connections"`
	Explanation Explanation `json:"explanation"`
	// Slots is the backend's part of the switch's select-group slot table, what dump-groups
	// shows summed over the backend's buckets (docs/dataplane.md, "Exact shares").
	Slots uint16 `json:"slots"`
	// Signals lists the optional signals of the backend's latest report ("service_cpu";
	// "none"); ServiceCPU is the service's own CPU, a fraction of CPUCount, nil when absent.
	Signals    string   `json:"signals"`
	ServiceCPU *float64 `json:"service_cpu"`
	// ShadowWeight and ShadowShare are what the shadow policy would give the backend (nil
	// without one): shown, never applied.
	ShadowWeight *uint16  `json:"shadow_weight"`
	ShadowShare  *float64 `json:"shadow_share"`
}

// Explanation is the controller's account of one weight.
type Explanation struct {
	Status string  `json:"status"`
	LS     float64 `json:"ls"`
	C      float64 `json:"c"`
	AL     float64 `json:"al"`
	Full   float64 `json:"full"`
	Warmup float64 `json:"warmup"`
	Final  float64 `json:"final"`
	Weight uint16  `json:"weight"`
	Note   string  `json:"note"`
	// WarmupTimer and WarmupWatch: while the backend ramps, the timer's fraction and the
	// watched ramp's verdict (docs/weights.md, "Warm-up that watches").
	WarmupTimer float64 `json:"warmup_timer"`
	WarmupWatch string  `json:"warmup_watch"`
}

// Event is one entry of /api/v1/events.
type Event struct {
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"`
	Backend string    `json:"backend"`
	Text    string    `json:"text"`
}

func (s *Scenario) apiClient() *http.Client { return s.Ctl.HTTPClient(5 * time.Second) }

// API fetches path (e.g. "/api/v1/services") from the controller's API, dialled from inside
// "ctl", and decodes the JSON into v.
func (s *Scenario) API(path string, v any) error { return s.APIOf(0, path, v) }

// APIOf is API of controller i.
func (s *Scenario) APIOf(i int, path string, v any) error {
	res, err := s.apiClient().Get("http://" + apiAddrOf(i) + path)
	if err != nil {
		return fmt.Errorf("scenario: api %s: %w", path, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("scenario: api %s: %w", path, err)
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("scenario: api %s: status %d: %s", path, res.StatusCode, bytes.TrimSpace(body))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("scenario: api %s: %w", path, err)
	}
	return nil
}

// APIText fetches path from controller i's API as text (/metrics).
func (s *Scenario) APIText(i int, path string, out *string) error {
	res, err := s.apiClient().Get("http://" + apiAddrOf(i) + path)
	if err != nil {
		return fmt.Errorf("scenario: api %s: %w", path, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("scenario: api %s: %w", path, err)
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("scenario: api %s: status %d", path, res.StatusCode)
	}
	*out = string(body)
	return nil
}

// APIPost sends an empty POST to path and fails on any status but 200.
func (s *Scenario) APIPost(path string) error { return s.APIPostOf(0, path) }

// APIPostOf is APIPost to controller i.
func (s *Scenario) APIPostOf(i int, path string) error {
	req, err := http.NewRequest(http.MethodPost, "http://"+apiAddrOf(i)+path, nil)
	if err != nil {
		return fmt.Errorf("scenario: api POST %s: %w", path, err)
	}
	if s.TokenFile != "" {
		tok, err := os.ReadFile(s.TokenFile)
		if err != nil {
			return fmt.Errorf("scenario: api POST %s: %w", path, err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	res, err := s.apiClient().Do(req)
	if err != nil {
		return fmt.Errorf("scenario: api POST %s: %w", path, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 1<<16))
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("scenario: api POST %s: status %d: %s", path, res.StatusCode, bytes.TrimSpace(body))
	}
	return nil
}

// Service returns the scenario's one service from the API.
func (s *Scenario) Service() (Service, error) { return s.ServiceOf(0) }

// ServiceOf is Service from controller i's API.
func (s *Scenario) ServiceOf(i int) (Service, error) {
	var svcs []Service
	if err := s.APIOf(i, "/api/v1/services", &svcs); err != nil {
		return Service{}, err
	}
	for _, v := range svcs {
		if v.GroupID == GroupID {
			return v, nil
		}
	}
	return Service{}, fmt.Errorf("scenario: api: no service with group_id %d among %d", GroupID, len(svcs))
}

// Applied returns the API's applied weight per backend name.
func (v Service) Applied() map[string]uint16 {
	out := map[string]uint16{}
	for _, b := range v.Backends {
		out[b.Name] = b.AppliedWeight
	}
	return out
}

// Slots returns the API's slots per backend name: what the switch's buckets must add up to.
func (v Service) Slots() map[string]uint16 {
	out := map[string]uint16{}
	for _, b := range v.Backends {
		out[b.Name] = b.Slots
	}
	return out
}

// Backend returns the named backend's view.
func (v Service) Backend(name string) (BackendView, bool) {
	for _, b := range v.Backends {
		if b.Name == name {
			return b, true
		}
	}
	return BackendView{}, false
}

// WaitReady waits until a switch is connected and every backend is "up" with a non-zero
// applied weight and slots in the group, and dump-groups equals the applied slots. The slots
// matter on their own: a backend is up (and weighted) as soon as it reports, but it gets
// buckets only once the controller has located it on the switch; until then the group spreads
// over the others, and its arrival moves slots (which breaks live connections in stateless
// mode).
func (s *Scenario) WaitReady(timeout time.Duration) error {
	return lab.Poll(timeout, func() error {
		var sw []string
		if err := s.API("/api/v1/switches", &sw); err != nil {
			return err
		}
		if len(sw) == 0 {
			return errors.New("scenario: no switch connected to the controller")
		}
		v, err := s.Service()
		if err != nil {
			return err
		}
		for _, b := range v.Backends {
			if b.State != "up" || b.AppliedWeight == 0 || b.Slots == 0 {
				return fmt.Errorf("scenario: backend %s is %q with applied weight %d and %d slots (health %q, last report %.1fs ago)",
					b.Name, b.State, b.AppliedWeight, b.Slots, b.Health, b.LastReportAge)
			}
		}
		_, err = s.InSync()
		return err
	})
}

// WaitServiceCPU waits until every backend's latest report carries the service's own CPU
// (service_cpu): the probes find their backendd through its pidfile, which takes one report
// interval after a (re)start, since a rate needs two readings.
func (s *Scenario) WaitServiceCPU(timeout time.Duration) error {
	return lab.Poll(timeout, func() error {
		v, err := s.Service()
		if err != nil {
			return err
		}
		for _, b := range v.Backends {
			if b.ServiceCPU == nil {
				return fmt.Errorf("scenario: backend %s: report without service_cpu (signals %q, state %q)", b.Name, b.Signals, b.State)
			}
		}
		return nil
	})
}

// GroupWeights reads the service's group from the switch (ovs-ofctl -O OpenFlow13
// dump-groups) and returns each backend's bucket weight by name. A backend without a bucket
// is absent from the map; its weight reads as 0.
func (s *Scenario) GroupWeights() (map[string]uint16, error) { return s.GroupWeightsOf(GroupID) }

// SlotOwners returns, in stateless mode, the backend each slot of the group's table sends to:
// the controller writes one weight-1 bucket per slot, and Open vSwitch gives slot i to bucket i
// (docs/dataplane.md). Any other layout is an error.
func (s *Scenario) SlotOwners() ([]string, error) {
	buckets, err := s.Bridge.GroupWeights(GroupID)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	ips := map[string]string{}
	for _, b := range s.Backends {
		ips[b.Name] = b.Host.Addr().String()
	}
	owners := make([]string, len(buckets))
	for i, k := range buckets {
		if k.Weight != 1 {
			return nil, fmt.Errorf("scenario: bucket %d has weight %d: not the one-bucket-per-slot layout", k.BucketID, k.Weight)
		}
		by, err := BucketsByBackend([]lab.BucketWeight{k}, ips)
		if err != nil {
			return nil, err
		}
		for name := range by {
			owners[i] = name
		}
	}
	return owners, nil
}

// BucketsByBackend names each bucket by the backend address its actions rewrite to (ips:
// name -> IPv4 address) and sums each backend's bucket weights: the controller writes slot
// counts, and a backend may have several buckets (the extra one-slot bucket, or one bucket per
// slot in stateless mode). A bucket naming no backend, or several, is an error.
func BucketsByBackend(buckets []lab.BucketWeight, ips map[string]string) (map[string]uint16, error) {
	out := map[string]uint16{}
	for _, k := range buckets {
		var found []string
		for name, ip := range ips {
			if mentionsIP(k.Actions, ip) {
				found = append(found, name)
			}
		}
		if len(found) != 1 {
			slices.Sort(found)
			return nil, fmt.Errorf("scenario: bucket %d (actions %q) names backends %v, want exactly one", k.BucketID, k.Actions, found)
		}
		out[found[0]] += k.Weight
	}
	return out, nil
}

// mentionsIP reports whether ip occurs in s as a whole address (10.0.0.1 is not in
// 10.0.0.12, fd00::b not in fd00::bc nor in fd00::b:1).
func mentionsIP(s, ip string) bool {
	if strings.Contains(ip, ":") {
		return mentionsIPv6(s, ip)
	}
	for i := 0; ; {
		j := strings.Index(s[i:], ip)
		if j < 0 {
			return false
		}
		a, e := i+j, i+j+len(ip)
		before := a == 0 || !isAddrByte(s[a-1])
		after := e == len(s) || !isDigit(s[e])
		if before && after {
			return true
		}
		i = a + 1
	}
}

// mentionsIPv6 is mentionsIP for an IPv6 address, whose neighbours in ovs-ofctl's text are
// "[", "]", ",", "-", "=" or the colon of "set_field:", never a hex digit, "." or another ":".
func mentionsIPv6(s, ip string) bool {
	v6 := func(c byte) bool { return isDigit(c) || c == ':' || c == '.' || (c|0x20 >= 'a' && c|0x20 <= 'f') }
	for i := 0; ; {
		j := strings.Index(s[i:], ip)
		if j < 0 {
			return false
		}
		a, e := i+j, i+j+len(ip)
		if (a == 0 || !v6(s[a-1]) || strings.HasSuffix(s[:a], "set_field:")) && (e == len(s) || !v6(s[e])) {
			return true
		}
		i = a + 1
	}
}

func isDigit(c byte) bool    { return c >= '0' && c <= '9' }
func isAddrByte(c byte) bool { return isDigit(c) || c == '.' }

// InSync compares the switch's bucket weights with the API's applied weights (a backend
// with weight 0 may have no bucket) and returns the switch's weights; an error says what
// differs.
func (s *Scenario) InSync() (map[string]uint16, error) { return s.InSyncOf(0) }

// InSyncOf is InSync against controller i's applied weights.
func (s *Scenario) InSyncOf(i int) (map[string]uint16, error) {
	v, err := s.ServiceOf(i)
	if err != nil {
		return nil, err
	}
	got, err := s.GroupWeights()
	if err != nil {
		return nil, err
	}
	return got, CompareWeights(got, v.Slots())
}

// CompareWeights checks that the switch's buckets (got) match the applied weights: every
// backend with a non-zero applied weight has a bucket of that weight, every other backend
// has none or weight 0, and no bucket names an unknown backend.
func CompareWeights(got, applied map[string]uint16) error {
	var diffs []string
	for name, w := range applied {
		if g := got[name]; g != w {
			diffs = append(diffs, fmt.Sprintf("%s: switch %d, applied %d", name, g, w))
		}
	}
	for name := range got {
		if _, ok := applied[name]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: bucket on the switch, unknown to the API", name))
		}
	}
	if len(diffs) > 0 {
		slices.Sort(diffs)
		return fmt.Errorf("scenario: dump-groups differs from the applied weights: %s", strings.Join(diffs, "; "))
	}
	return nil
}

var (
	flowCounters = regexp.MustCompile(`\b(duration|n_packets|n_bytes|idle_age|hard_age)=[^,\s]*,?\s*`)
	spaces       = regexp.MustCompile(`\s+`)
)

// NormalizeFlows turns `ovs-ofctl dump-flows` output into a sorted list of flows without
// counters, durations and ages, so two dumps of the same table compare equal. Header lines
// (OFPST_FLOW reply) are dropped; duplicates are kept, so a doubled flow shows.
func NormalizeFlows(out string) []string {
	var flows []string
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "OFPST_") || strings.HasPrefix(line, "OFPT_") {
			continue
		}
		line = flowCounters.ReplaceAllString(line, "")
		line = spaces.ReplaceAllString(strings.TrimSpace(line), " ")
		if line == "" { // nothing but counters: not a flow
			continue
		}
		flows = append(flows, line)
	}
	slices.Sort(flows)
	return flows
}

// Flows returns the bridge's normalised flows.
func (s *Scenario) Flows() ([]string, error) {
	out, err := s.Bridge.DumpFlows()
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	return NormalizeFlows(out), nil
}

// Groups returns the bridge's groups as parsed from dump-groups.
func (s *Scenario) Groups() ([]lab.Group, error) {
	out, err := s.Bridge.DumpGroups()
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	g, err := lab.ParseGroups(out)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	return g, nil
}

// Dump writes everything a failure needs: flows, groups, the API's view and events, and
// the tails of the controller's, probes' and backends' logs (lab.SaveDiagnostics).
func (s *Scenario) Dump(w io.Writer) {
	s.Lab.SaveDiagnostics(s.Bridge, w)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, path := range []string{"/api/v1/services", "/api/v1/events"} {
		var raw json.RawMessage
		err := s.API(path, &raw)
		fmt.Fprintf(w, "==== controller api %s ====\n%s\n", path, raw)
		if err != nil {
			fmt.Fprintf(w, "(error: %v)\n", err)
		}
		if ctx.Err() != nil {
			return
		}
	}
	fmt.Fprintf(w, "==== controller log (tail) ====\n%s\n", lab.Tail(s.ControllerLog(), 60))
}
