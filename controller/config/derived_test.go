package config

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Every [collector] default checked against poll_interval is valid with every allowed
// poll_interval: poll_interval = "100ms" alone once failed to load, because the default
// health_fast_interval (250 ms) was longer.
func TestCollectorDefaultsValidTogether(t *testing.T) {
	polls := []time.Duration{time.Millisecond, 5 * time.Millisecond, MinHealthFastInterval, 100 * time.Millisecond,
		249 * time.Millisecond, DefaultHealthFastInterval, time.Second, DefaultHealthTimeout, 5 * time.Second, time.Hour}
	files := map[string]string{
		"probe backends":       good,
		"snmp with health_url": snmpGood("  health_url = \"http://10.0.0.2:8080/\"\n", ""),
		"snmp with [health]":   healthTable("  type = \"tcp\"\n"),
	}
	for _, poll := range polls {
		for name, file := range files {
			t.Run(fmt.Sprintf("%v %s", poll, name), func(t *testing.T) {
				body := strings.Replace(file, "[collector]\n", fmt.Sprintf("[collector]\npoll_interval = %q\n", poll.String()), 1)
				c, err := Parse("c.toml", []byte(body))
				if err != nil {
					t.Fatalf("defaults refused with poll_interval %v: %v", poll, err)
				}
				if got, want := c.Collector.HealthFastInterval, min(DefaultHealthFastInterval, poll); got != want {
					t.Errorf("health_fast_interval = %v, want %v", got, want)
				}
				if got, want := c.Collector.HealthTimeout, min(DefaultHealthTimeout, poll); got != want {
					t.Errorf("health_timeout = %v, want %v", got, want)
				}
			})
		}
	}
	// Values that are set are kept, and still checked.
	set := strings.Replace(good, "[collector]\n", "[collector]\npoll_interval = \"10s\"\nhealth_timeout = \"3s\"\nhealth_fast_interval = \"500ms\"\n", 1)
	c, err := Parse("c.toml", []byte(set))
	if err != nil || c.Collector.HealthTimeout != 3*time.Second || c.Collector.HealthFastInterval != 500*time.Millisecond {
		t.Fatalf("set values: %+v, %v", c, err)
	}
	for _, bad := range []struct{ lines, want string }{
		{"poll_interval = \"1s\"\nhealth_fast_interval = \"2s\"\n", "longer than poll_interval"},
		{"poll_interval = \"1s\"\nhealth_fast_interval = \"5ms\"\n", "below the minimum"},
	} {
		if _, err := Parse("c.toml", []byte(strings.Replace(good, "[collector]\n", "[collector]\n"+bad.lines, 1))); err == nil ||
			!strings.Contains(err.Error(), "collector.health_fast_interval") || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: err = %v, want collector.health_fast_interval %s", bad.lines, err, bad.want)
		}
	}
}
