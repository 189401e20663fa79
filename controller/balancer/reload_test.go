package balancer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"flowweight/controller/config"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// exampleWithKey returns the real example configuration with its secret_file line pointed at a
// secret in a temporary directory (same number of lines, so line prefixes keep their meaning).
func exampleWithKey(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "configs", "controller.toml"))
	if err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "push.secret")
	if err := os.WriteFile(secret, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := "\nsecret_file = \"/etc/flowweight/push.secret\""
	if !strings.Contains(string(data), old) {
		t.Fatal("the example's secret_file line changed; update the test")
	}
	return []byte(strings.Replace(string(data), old, "\nsecret_file = \""+secret+"\"", 1))
}

// TestReloadRefusesTruncatedExample reloads every line prefix of the real example into a
// controller running the whole file. A prefix without the service or with fewer than two of
// its three backends must change nothing: same configuration, same pool, same desired flows.
func TestReloadRefusesTruncatedExample(t *testing.T) {
	full := exampleWithKey(t)
	lines := strings.SplitAfter(string(full), "\n")
	applied, refused := 0, 0
	for n := 0; n < len(lines); n++ {
		prefix := []byte(strings.Join(lines[:n], ""))
		next, err := config.Parse("prefix", prefix)
		if err != nil {
			continue
		}
		kept := 0
		if len(next.Services) == 1 {
			kept = len(next.Services[0].Backends)
		}
		mustRefuse := len(next.Services) == 0 || kept < 2

		cfg, err := config.Parse("controller.toml", full)
		if err != nil {
			t.Fatal(err)
		}
		m := NewMetrics()
		b, err := New(cfg, Options{Metrics: m})
		if err != nil {
			t.Fatal(err)
		}
		before, _ := desiredFor(b, 1)
		err = b.ReloadFile("controller.toml", prefix, ReloadOptions{Trigger: "test"})
		var rr *RemovalRefusedError
		if mustRefuse {
			refused++
			if !errors.As(err, &rr) {
				t.Fatalf("prefix of %d lines (%d services, %d backends) was not refused: %v", n, len(next.Services), kept, err)
			}
			after, _ := desiredFor(b, 1)
			if b.Config() != cfg || len(after.Flows) != len(before.Flows) || len(after.Groups) != len(before.Groups) ||
				!b.pool.Known("web1") || !b.pool.Known("web3") {
				t.Fatalf("refused prefix of %d lines changed the running state: %d -> %d flows", n, len(before.Flows), len(after.Flows))
			}
			if got := counterValue(t, m.reloads.WithLabelValues(ReloadRefused)); got != 1 {
				t.Fatalf("refused reloads counted %v", got)
			}
			ev := b.Events()
			if len(ev) == 0 || !strings.Contains(ev[len(ev)-1].Text, "controller.toml: reload refused") || !strings.Contains(ev[len(ev)-1].Text, "-allow-removal") {
				t.Fatalf("no refusal event naming the file and the way out: %+v", ev)
			}
			continue
		}
		applied++
		if err != nil {
			t.Fatalf("prefix of %d lines keeps %d of 3 backends and must apply: %v", n, kept, err)
		}
		if got := counterValue(t, m.reloads.WithLabelValues(ReloadApplied)); got != 1 {
			t.Fatalf("applied reloads counted %v", got)
		}
	}
	if refused == 0 || applied == 0 {
		t.Fatalf("%d refused, %d applied: the example changed shape", refused, applied)
	}
}

func TestReloadAllowRemoval(t *testing.T) {
	full := exampleWithKey(t)
	cfg, err := config.Parse("controller.toml", full)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.ReloadFile("controller.toml", nil, ReloadOptions{}); err == nil {
		t.Fatal("an empty file was applied without AllowRemoval")
	}
	if err := b.ReloadFile("controller.toml", nil, ReloadOptions{AllowRemoval: true}); err != nil {
		t.Fatalf("an empty file with AllowRemoval: %v", err)
	}
	if d, _ := desiredFor(b, 1); len(b.Config().Services) != 0 || b.pool.Known("web1") || len(d.Groups) != 0 {
		t.Fatalf("the confirmed removal was not applied: %d services, %d groups", len(b.Config().Services), len(d.Groups))
	}
	// Adding everything back needs no confirmation.
	if err := b.ReloadFile("controller.toml", full, ReloadOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestReloadInvalidCounted(t *testing.T) {
	m := NewMetrics()
	b, err := New(testConfig(t, ""), Options{Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	err = b.ReloadFile("bad.toml", []byte("[controller]\nupdate_period = \"fast\"\n"), ReloadOptions{})
	if err == nil || !strings.Contains(err.Error(), "bad.toml") {
		t.Fatalf("invalid file: %v", err)
	}
	if got := counterValue(t, m.reloads.WithLabelValues(ReloadInvalid)); got != 1 {
		t.Fatalf("invalid reloads counted %v (err %v)", got, err)
	}
}

// TestRefusalNamesAWorkingCommand: the command in a refusal can be pasted as it is.
func TestRefusalNamesAWorkingCommand(t *testing.T) {
	cases := []struct{ file, state, want string }{
		{"/etc/flowweight/controller.toml", "/var/lib/flowweight/controller.state",
			"-config /etc/flowweight/controller.toml -state /var/lib/flowweight/controller.state`"},
		{"/etc/my configs/c.toml", "", "-config '/etc/my configs/c.toml' -state ''`"},
		{"/tmp/it's.toml", "/s", `-config '/tmp/it'\''s.toml' -state /s` + "`"},
	}
	for _, tc := range cases {
		e := &RemovalRefusedError{File: tc.file, State: tc.state, Removal: config.Removal{Services: []string{"web"}}}
		if !strings.HasSuffix(e.Error(), tc.want) {
			t.Errorf("%q", e.Error())
		}
	}
}
