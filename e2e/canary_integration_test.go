//go:build integration

package e2e

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"flowweight/e2e/scenario"
)

// TestCanaryOnOneSwitch runs issue 24's canary on two real switches of one controller: a
// service with policy "static" and shadow_policy "equal" (the backends' CPU quotas 0.25, 0.5
// and 1 keep the two splits far apart). Both bridges first hold the live split; a reload
// naming the second bridge in canary_datapaths makes it hold the shadow policy's split while
// the first keeps the live one; a reload without it brings the second back to the live split.
// The second bridge has hosts at the backends' addresses that run nothing: they answer ARP,
// so the controller locates the backends there and writes buckets, which is all compared.
func TestCanaryOnOneSwitch(t *testing.T) {
	s := startScenario(t, scenario.Options{Net: 57, Weighting: map[string]string{"policy": `"static"`},
		ServiceKeys: map[string]string{"shadow_policy": `"equal"`}})
	br2, err := s.OVS.AddBridge("cn", "unix:"+s.Socket, "secure")
	if err != nil {
		t.Fatal(err)
	}
	ips := map[string]string{}
	for i, b := range s.Backends {
		if _, err := br2.AddHost("cn"+strconv.Itoa(i+1), b.Host.IP); err != nil {
			t.Fatal(err)
		}
		ips[b.Name] = b.Host.Addr().String()
	}
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
	live, shadow := map[string]float64{}, map[string]float64{}
	for _, b := range v.Backends {
		live[b.Name], shadow[b.Name] = float64(b.AppliedWeight)/float64(v.Total), *b.ShadowShare
	}
	onSecond := func() (map[string]uint16, error) {
		buckets, err := br2.GroupWeights(scenario.GroupID)
		if err != nil {
			return nil, err
		}
		return scenario.BucketsByBackend(buckets, ips)
	}
	// expect waits until the first bridge holds want1's split and the second want2's, each
	// backend within one slot, on two reads in a row.
	expect := func(what string, want1, want2 map[string]float64) {
		t.Helper()
		var held1, held2 map[string]uint16
		if _, err := waitFor(30*time.Second, func() error {
			for range 2 {
				var err error
				if held1, err = s.GroupWeightsOf(scenario.GroupID); err != nil {
					return err
				}
				if held2, err = onSecond(); err != nil {
					return err
				}
				if err := holdsSplit(held1, want1); err != nil {
					return fmt.Errorf("first bridge: %w", err)
				}
				if err := holdsSplit(held2, want2); err != nil {
					return fmt.Errorf("second bridge: %w", err)
				}
			}
			return nil
		}); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		t.Logf("%s: first bridge %v, second bridge %v", what, held1, held2)
	}
	expect("no canary: both live", live, live)

	s.Opts.ServiceKeys["canary_datapaths"] = fmt.Sprintf("[%q]", fmt.Sprintf("%016x", br2.DPID))
	if err := s.Reload(nil, ""); err != nil {
		t.Fatal(err)
	}
	expect("canary on the second bridge", live, shadow)
	if v, err := s.Service(); err != nil {
		t.Fatal(err)
	} else if want := fmt.Sprintf("%016x", br2.DPID); len(v.CanaryDatapaths) != 1 || v.CanaryDatapaths[0] != want {
		t.Errorf("the API shows canary_datapaths %v, want [%s]", v.CanaryDatapaths, want)
	}
	if status := controllerStatus(t, s); !strings.Contains(status, "applied as a canary on "+fmt.Sprintf("%016x", br2.DPID)+" only") {
		t.Errorf("controller status does not name the canary switch:\n%s", status)
	}

	delete(s.Opts.ServiceKeys, "canary_datapaths")
	if err := s.Reload(nil, ""); err != nil {
		t.Fatal(err)
	}
	expect("canary dropped by a reload", live, live)
}

// holdsSplit is nil when the buckets (held, per backend) give each backend its share within
// one slot of the table.
func holdsSplit(held map[string]uint16, shares map[string]float64) error {
	table := 0
	for _, w := range held {
		table += int(w)
	}
	if table == 0 {
		return fmt.Errorf("no buckets")
	}
	for name, want := range shares {
		if got := float64(held[name]) / float64(table); math.Abs(got-want) > 1/float64(table) {
			return fmt.Errorf("%s has %d of %d slots (%.3f), want %.3f: %v", name, held[name], table, got, want, held)
		}
	}
	return nil
}
