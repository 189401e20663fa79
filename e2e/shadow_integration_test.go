//go:build integration

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"flowweight/e2e/scenario"
)

// TestShadowPolicyNeverApplied runs a service with policy "static" and shadow_policy "equal"
// on the real switch (the backends' CPU quotas 0.25, 0.5 and 1 make the two splits far
// apart): once settled, the API and /metrics show shadow weights that differ from the live
// ones, and the switch's buckets hold exactly the slot table of the live weights, nowhere
// near the shadow's split. A reload that drops the shadow removes it from the API and
// /metrics without a restart and leaves the switch's buckets as they were.
func TestShadowPolicyNeverApplied(t *testing.T) {
	s := startScenario(t, scenario.Options{Net: 97, Weighting: map[string]string{"policy": `"static"`},
		ServiceKeys: map[string]string{"shadow_policy": `"equal"`}})
	waitWarmedUp(t, s, 30*time.Second)
	var v scenario.Service
	if _, err := waitFor(30*time.Second, func() error {
		var err error
		if v, err = s.Service(); err != nil {
			return err
		}
		return shadowDiffers(v)
	}); err != nil {
		t.Fatalf("the API never showed shadow weights apart from the live ones: %v", err)
	}
	held := stableSync(t, s, 30*time.Second) // the switch equals the API's slots, twice
	if v, err := s.Service(); err != nil {
		t.Fatal(err)
	} else if err := holdsLiveNotShadow(v, held); err != nil {
		t.Fatal(err)
	} else {
		for _, b := range v.Backends {
			t.Logf("%s: live weight %d share %.3f, shadow weight %d share %.3f, switch buckets %d", b.Name, b.AppliedWeight,
				float64(b.AppliedWeight)/float64(v.Total), *b.ShadowWeight, *b.ShadowShare, held[b.Name])
		}
		series, err := shadowSeries(s)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("/metrics: flowweight_backend_weight_shadow %v", series)
		for _, b := range v.Backends {
			if series[b.Name] != float64(*b.ShadowWeight) {
				t.Errorf("/metrics: flowweight_backend_weight_shadow %v, want %s = %d as the API shows", series, b.Name, *b.ShadowWeight)
			}
		}
	}
	status := controllerStatus(t, s)
	for _, want := range []string{"shadow policy: equal (computed beside the live weights, never applied)", "SHADOW"} {
		if !strings.Contains(status, want) {
			t.Errorf("controller status lacks %q", want)
		}
	}

	// Drop the shadow by reload: gone from the API and /metrics, the switch unchanged.
	s.Opts.ServiceKeys = nil
	if err := s.Reload(nil, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := waitFor(10*time.Second, func() error {
		v, err := s.Service()
		if err != nil {
			return err
		}
		if v.ShadowPolicy != "" || v.Backends[0].ShadowWeight != nil {
			return fmt.Errorf("the API still shows shadow %q", v.ShadowPolicy)
		}
		if series, err := shadowSeries(s); err != nil || len(series) > 0 {
			return fmt.Errorf("/metrics still has shadow series %v (%v)", series, err)
		}
		return nil
	}); err != nil {
		t.Fatalf("after the reload that dropped shadow_policy: %v", err)
	}
	if after := stableSync(t, s, 30*time.Second); fmt.Sprint(after) != fmt.Sprint(held) {
		t.Errorf("dropping the shadow changed the switch's buckets: %v, before %v", after, held)
	}
}

// shadowDiffers is nil when v shows the shadow policy "equal" with a weight and share for
// every backend, and at least one shadow weight apart from the live one.
func shadowDiffers(v scenario.Service) error {
	if v.ShadowPolicy != "equal" {
		return fmt.Errorf("shadow_policy %q, want equal", v.ShadowPolicy)
	}
	differs := false
	for _, b := range v.Backends {
		if b.State != "up" || b.AppliedWeight == 0 || b.ShadowWeight == nil || b.ShadowShare == nil {
			return fmt.Errorf("%s: state %s, live weight %d, shadow weight %v share %v", b.Name, b.State, b.AppliedWeight, b.ShadowWeight, b.ShadowShare)
		}
		differs = differs || *b.ShadowWeight != b.AppliedWeight
	}
	if !differs {
		return errors.New("the shadow weights equal the live ones")
	}
	return nil
}

// holdsLiveNotShadow is nil when the switch's buckets (held, per backend) are the slot
// table of the live weights — each backend's slots within one slot of its live share — and
// not the shadow's: some backend is more than two slots from its shadow share.
func holdsLiveNotShadow(v scenario.Service, held map[string]uint16) error {
	table := 0
	for _, w := range held {
		table += int(w)
	}
	if table == 0 {
		return errors.New("the switch holds no buckets")
	}
	farFromShadow := false
	for _, b := range v.Backends {
		got := float64(held[b.Name]) / float64(table)
		if live := float64(b.AppliedWeight) / float64(v.Total); math.Abs(got-live) > 1/float64(table) {
			return fmt.Errorf("%s: the switch gives it %d of %d slots (%.3f), the live weight %d of %d is %.3f", b.Name, held[b.Name], table, got, b.AppliedWeight, v.Total, live)
		}
		farFromShadow = farFromShadow || math.Abs(got-*b.ShadowShare) > 2/float64(table)
	}
	if !farFromShadow {
		return fmt.Errorf("the switch's buckets %v are as near the shadow's split as the live one's", held)
	}
	return nil
}

var shadowLine = regexp.MustCompile(`(?m)^flowweight_backend_weight_shadow\{backend="([^"]+)",service="web"\} (\S+)$`)

// shadowSeries reads flowweight_backend_weight_shadow of service web from /metrics, by backend.
func shadowSeries(s *scenario.Scenario) (map[string]float64, error) {
	var text string
	if err := s.APIText(0, "/metrics", &text); err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, m := range shadowLine.FindAllStringSubmatch(text, -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			return nil, err
		}
		out[m[1]] = v
	}
	return out, nil
}

// controllerStatus runs `controller status` inside "ctl" and logs its output.
func controllerStatus(t *testing.T, s *scenario.Scenario) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	c := s.Ctl.Command(ctx, s.Opts.Bins.Controller, "status", "-api", "http://"+scenario.APIAddr)
	c.Stdout, c.Stderr = &out, &out
	if err := c.Run(); err != nil {
		t.Fatalf("controller status: %v\n%s", err, out.String())
	}
	t.Logf("$ controller status\n%s", out.String())
	return out.String()
}
