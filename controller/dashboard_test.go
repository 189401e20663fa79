package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"flowweight/controller/api"
	"flowweight/controller/balancer"
	"flowweight/controller/config"
	"flowweight/controller/view"

	"github.com/prometheus/client_golang/prometheus"
)

// describer is a Registerer that also keeps the name and labels of every metric it is given,
// read from the descriptors: a vector without children has no series to Gather yet.
type describer struct {
	prometheus.Registerer
	labels map[string][]string // metric name -> its variable labels
}

var descRE = regexp.MustCompile(`^Desc\{fqName: "([^"]+)".*variableLabels: \{([^}]*)\}\}$`)

func (d *describer) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 256)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		m := descRE.FindStringSubmatch(desc.String())
		if m == nil {
			return fmt.Errorf("descriptor not understood: %s", desc)
		}
		var labels []string
		for l := range strings.SplitSeq(m[2], ",") {
			if l = strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")"); l != "" {
				labels = append(labels, l)
			}
		}
		d.labels[m[1]] = labels
	}
	return d.Registerer.Register(c)
}

func (d *describer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := d.Register(c); err != nil {
			panic(err)
		}
	}
}

// exported is every metric /metrics serves, with its labels: what run registers.
func exported(t *testing.T) map[string][]string {
	t.Helper()
	reg := prometheus.NewRegistry()
	d := &describer{Registerer: reg, labels: map[string][]string{}}
	if err := registerMetrics(d, balancer.NewMetrics()); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("../configs/controller.toml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("../configs/controller.toml", data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.NewServer(view.NewBoard(), reg, api.OptionsFrom(cfg.API, nil, d)); err != nil {
		t.Fatal(err)
	}
	return d.labels
}

// Target labels Prometheus adds to every series it scrapes, and the histogram bucket label.
var scrapeLabels = []string{"instance", "job"}

// promqlWords are PromQL's keywords: never metric names.
var promqlWords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true,
	"group_right": true, "bool": true, "and": true, "or": true, "unless": true, "offset": true}

// aggregations are PromQL's aggregation operators: a grouping clause may stand between one
// and its parenthesis (sum by (le) (...)).
var aggregations = map[string]bool{"sum": true, "avg": true, "min": true, "max": true, "count": true, "group": true,
	"stddev": true, "stdvar": true, "topk": true, "bottomk": true, "quantile": true, "count_values": true,
	"limitk": true, "limit_ratio": true}

// grouping are the keywords whose parenthesised list names labels.
var grouping = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// queryRefs is what a PromQL expression refers to: metric names with the labels its matchers
// name, and the labels its grouping clauses name. It is a scanner, not a parser: enough for a
// dashboard's queries, strict where it does not understand (an identifier it cannot place is
// taken as a metric name, which then must exist).
type queryRefs struct {
	metrics  map[string][]string // name -> labels matched
	grouping []string
}

var identRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*`)

func scanQuery(q string) (queryRefs, error) {
	refs := queryRefs{metrics: map[string][]string{}}
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for j < len(q) && q[j] != c {
				if q[j] == '\\' {
					j++
				}
				j++
			}
			i = j + 1
		case c == '{': // a selector without a name before it: {__name__="x"} names one
			end := strings.IndexByte(q[i:], '}')
			if end < 0 {
				return refs, fmt.Errorf("unclosed { in %q", q)
			}
			name, matched := "", []string(nil)
			for m := range strings.SplitSeq(q[i+1:i+end], ",") {
				l, v, ok := strings.Cut(m, "=")
				l = strings.TrimRight(strings.TrimSpace(l), "!")
				if !ok || !identRE.MatchString(l) || identRE.FindString(l) != l {
					return refs, fmt.Errorf("matcher %q in %q", m, q)
				}
				if l != "__name__" {
					matched = append(matched, l)
					continue
				}
				v = strings.TrimSpace(v)
				if strings.HasPrefix(v, "~") || len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
					return refs, fmt.Errorf("%q: __name__ must be matched exactly (=\"name\"), so the check can follow it", q)
				}
				name = v[1 : len(v)-1]
			}
			if name == "" {
				return refs, fmt.Errorf("%q: a selector without a metric name matches every metric's series", q)
			}
			refs.metrics[name] = append(refs.metrics[name], matched...)
			i += end + 1
		case c == '[': // a range or subquery duration
			j := strings.IndexByte(q[i:], ']')
			if j < 0 {
				return refs, fmt.Errorf("unclosed [ in %q", q)
			}
			i += j + 1
		case c >= '0' && c <= '9' || c == '.':
			for i < len(q) && (q[i] >= '0' && q[i] <= '9' || q[i] == '.' || q[i] == 'e' || q[i] == 'E') {
				i++
			}
		case identRE.MatchString(q[i:]):
			w := identRE.FindString(q[i:])
			i += len(w)
			rest := strings.TrimLeft(q[i:], " \t\n")
			switch {
			case grouping[w]:
				if !strings.HasPrefix(rest, "(") {
					continue
				}
				end := strings.IndexByte(rest, ')')
				if end < 0 {
					return refs, fmt.Errorf("unclosed %s ( in %q", w, q)
				}
				for l := range strings.SplitSeq(rest[1:end], ",") {
					if l = strings.TrimSpace(l); l != "" {
						refs.grouping = append(refs.grouping, l)
					}
				}
				i = len(q) - len(rest) + end + 1
			case promqlWords[w] || aggregations[w]:
			case strings.HasPrefix(rest, "("): // a function or an aggregation
			default:
				var matched []string
				if strings.HasPrefix(rest, "{") {
					end := strings.IndexByte(rest, '}')
					if end < 0 {
						return refs, fmt.Errorf("unclosed { in %q", q)
					}
					for m := range strings.SplitSeq(rest[1:end], ",") {
						name, _, ok := strings.Cut(m, "=")
						name = strings.TrimRight(strings.TrimSpace(name), "!")
						if !ok || !identRE.MatchString(name) || identRE.FindString(name) != name {
							return refs, fmt.Errorf("matcher %q in %q", m, q)
						}
						matched = append(matched, name)
					}
					i = len(q) - len(rest) + end + 1
				}
				refs.metrics[w] = append(refs.metrics[w], matched...)
			}
		default:
			i++
		}
	}
	return refs, nil
}

// metricLabels is the labels a reference to name may use: its own, the scrape's, and le on a
// histogram's _bucket series.
func metricLabels(exp map[string][]string, name string) ([]string, bool) {
	if l, ok := exp[name]; ok {
		return append(slices.Clone(l), scrapeLabels...), true
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suf); ok {
			if l, ok := exp[base]; ok {
				l = append(slices.Clone(l), scrapeLabels...)
				if suf == "_bucket" {
					l = append(l, "le")
				}
				return l, true
			}
		}
	}
	return nil, false
}

// dashboardQueries is every PromQL expression in the dashboard: the panels' targets (rows
// nest panels too) and the template variables' label_values queries, keyed by where it is.
func dashboardQueries(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels      []panel `json:"panels"`
		Annotations struct {
			List []struct {
				Name string `json:"name"`
				Expr string `json:"expr"`
			} `json:"list"`
		} `json:"annotations"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string]string{}
	ids := map[int]string{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if other, dup := ids[p.ID]; dup {
				t.Errorf("%s: panels %q and %q share id %d", path, other, p.Title, p.ID)
			}
			ids[p.ID] = p.Title
			refIDs := map[string]bool{}
			for _, tg := range p.Targets {
				if tg.Expr == "" {
					t.Errorf("%s: panel %q: a target without expr", path, p.Title)
				}
				if refIDs[tg.RefID] {
					t.Errorf("%s: panel %q: refId %q twice", path, p.Title, tg.RefID)
				}
				refIDs[tg.RefID] = true
				out["panel "+p.Title+" "+tg.RefID] = tg.Expr
			}
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", path, p.Title)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for i, a := range d.Annotations.List {
		if a.Expr != "" {
			out[fmt.Sprintf("annotation %d %s", i, a.Name)] = a.Expr
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			if err := json.Unmarshal(v.Query, &q.Query); err != nil {
				t.Fatalf("%s: variable %s: query %s", path, v.Name, v.Query)
			}
		}
		out["variable "+v.Name] = q.Query
	}
	return out
}

type panel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

var labelValuesRE = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// TestDashboardNamesExportedMetrics: every query of configs/grafana-dashboard.json names
// metrics /metrics serves, with labels they carry, so a renamed metric or a typo fails here
// and not as an empty panel on an operator's screen.
func TestDashboardNamesExportedMetrics(t *testing.T) {
	exp := exported(t)
	queries := dashboardQueries(t, "../configs/grafana-dashboard.json")
	if len(queries) < 10 {
		t.Fatalf("the dashboard has %d queries", len(queries))
	}
	for where, q := range queries {
		var extra []string // a label_values variable's label
		if m := labelValuesRE.FindStringSubmatch(q); m != nil {
			q, extra = m[1], []string{m[2]}
		}
		if err := checkQuery(exp, q, extra); err != nil {
			t.Errorf("%s: %v", where, err)
		}
	}
}

// checkQuery is nil when every metric q names is exported, every label its matchers,
// grouping clauses and extra name belongs to one of its metrics, and it names one at least.
func checkQuery(exp map[string][]string, q string, extra []string) error {
	refs, err := scanQuery(q)
	if err != nil {
		return err
	}
	if len(refs.metrics) == 0 {
		return fmt.Errorf("%q names no metric", q)
	}
	var all []string
	for name, matched := range refs.metrics {
		labels, ok := metricLabels(exp, name)
		if !ok {
			return fmt.Errorf("%q: no metric %s is exported", q, name)
		}
		for _, l := range matched {
			if !slices.Contains(labels, l) {
				return fmt.Errorf("%q: %s has no label %s (it has %v)", q, name, l, labels)
			}
		}
		all = append(all, labels...)
	}
	for _, l := range append(refs.grouping, extra...) {
		if !slices.Contains(all, l) {
			return fmt.Errorf("%q: no metric in it has the label %s", q, l)
		}
	}
	return nil
}

// TestDashboardCheckRefuses: the check itself fails on what it is there to catch.
func TestDashboardCheckRefuses(t *testing.T) {
	exp := map[string][]string{
		"flowweight_backend_weight_applied": {"service", "backend"},
		"flowweight_barrier_rtt_seconds":    nil,
	}
	good := []string{
		`{__name__="flowweight_backend_weight_applied",service="web"}`,
		`flowweight_backend_weight_applied{service=~"$service",instance=~"$instance"}`,
		`histogram_quantile(0.99, sum by (le) (rate(flowweight_barrier_rtt_seconds_bucket[$__rate_interval])))`,
		`avg by (service, backend) (flowweight_backend_weight_applied) > 0`,
	}
	for _, q := range good {
		if err := checkQuery(exp, q, nil); err != nil {
			t.Errorf("%q refused: %v", q, err)
		}
	}
	bad := []string{
		`flowweight_backend_weight_aplied{service="web"}`,                // a typo in the name
		`flowweight_backend_weight_applied{svc="web"}`,                   // a label it does not have
		`sum by (dpid) (flowweight_backend_weight_applied)`,              // grouping by a label none has
		`rate(flowweight_barrier_rtt_seconds_bucket{le="0.1"}[5m]) + up`, // a metric not ours
		`vector(1)`, // no metric at all
		`flowweight_backend_weight_applied{service="web"`,          // unclosed
		`{__name__="flowweight_backend_weight_aplied"}`,            // a typo, in a selector without a name before it
		`{__name__="flowweight_backend_weight_applied",svc="web"}`, // a label it does not have, likewise
		`{__name__=~"flowweight_.*"}`,                              // a name the check cannot follow
		`sum({service="web"})`,                                     // no name at all: every metric's series
	}
	for _, q := range bad {
		if err := checkQuery(exp, q, nil); err == nil {
			t.Errorf("%q accepted", q)
		}
	}
	if err := checkQuery(exp, `flowweight_backend_weight_applied`, []string{"instance"}); err != nil {
		t.Errorf("label_values on instance refused: %v", err)
	}
	if err := checkQuery(exp, `flowweight_backend_weight_applied`, []string{"dpid"}); err == nil {
		t.Error("label_values on a label the metric does not have accepted")
	}
}

// TestDashboardQueriesFindsEveryQuery: the queries are found wherever a dashboard keeps them:
// nested panels, template variables and annotations (which the check once skipped, so an
// annotation naming a renamed metric passed).
func TestDashboardQueriesFindsEveryQuery(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.json")
	d := `{"panels": [{"id": 1, "type": "row", "title": "r", "panels": [{"id": 2, "type": "timeseries", "title": "p", "targets": [{"expr": "a", "refId": "A"}]}]}],
	"annotations": {"list": [{"name": "reloads", "expr": "changes(flowweight_config_reloads_totl[5m]) > 0"}]},
	"templating": {"list": [{"name": "v", "type": "query", "query": {"query": "label_values(b, service)"}}]}}`
	if err := os.WriteFile(path, []byte(d), 0o600); err != nil {
		t.Fatal(err)
	}
	got := dashboardQueries(t, path)
	want := map[string]string{"panel p A": "a", "variable v": "label_values(b, service)",
		"annotation 0 reloads": "changes(flowweight_config_reloads_totl[5m]) > 0"}
	if !maps.Equal(got, want) {
		t.Errorf("queries found: %v\nwant %v", got, want)
	}
}
