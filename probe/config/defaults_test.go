package config

import (
	"fmt"
	"testing"
	"time"
)

// Every default is valid with every allowed value of the keys it is checked against: a file
// that sets only those keys, to any value in their range, loads. A probe with interval = "1s"
// and a health URL once refused to start because the default health.timeout was 2 s.
func TestDefaultsValidTogether(t *testing.T) {
	intervals := []time.Duration{MinInterval, 250 * time.Millisecond, time.Second, 1999 * time.Millisecond,
		DefaultHealthTimeout, 5 * time.Second, MaxInterval}
	sections := map[string]string{
		"no health check":       "",
		"health url":            "[health]\nurl = \"http://monitor:pw@127.0.0.1:8080/healthz\"\n",
		"health url, timeout 0": "[health]\nurl = \"http://127.0.0.1:8080/healthz\"\ntimeout = \"0s\"\n",
		"health and agent check": "[health]\nurl = \"https://127.0.0.1/\"\n" +
			"[agent_check]\nlisten = \"127.0.0.1:8081\"\ncheckers = [\"127.0.0.1\"]\n",
		"cgroup scope": "scope = \"cgroup\"\ncgroup_path = \"flowweight/web1\"\n[health]\nurl = \"http://127.0.0.1/\"\n",
	}
	for _, iv := range intervals {
		for name, section := range sections {
			for _, conns := range []string{"", "conns_interval = \"0s\"\n", "conns_interval = \"100ms\"\n", "conns_interval = \"1h\"\n"} {
				t.Run(fmt.Sprintf("interval %v, %s, %q", iv, name, conns), func(t *testing.T) {
					body := minimal + fmt.Sprintf("interval = %q\n", iv.String()) + conns + section
					c, err := Load(write(t, body))
					if err != nil {
						t.Fatalf("defaults refused:\n%s\n%v", body, err)
					}
					if want := min(DefaultHealthTimeout, iv); c.Health.Timeout != want {
						t.Errorf("health.timeout = %v, want %v", c.Health.Timeout, want)
					}
					if c.Health.FastInterval > c.Interval {
						t.Errorf("health.fast_interval %v > interval %v", c.Health.FastInterval, c.Interval)
					}
				})
			}
		}
	}
	// A timeout that is set is kept, and still checked.
	c, err := Load(write(t, minimal+"interval = \"10s\"\n[health]\nurl = \"http://h/\"\ntimeout = \"3s\"\n"))
	if err != nil || c.Health.Timeout != 3*time.Second {
		t.Fatalf("timeout 3s at interval 10s: %v, %v", c.Health.Timeout, err)
	}
	if _, err := Load(write(t, minimal+"interval = \"1s\"\n[health]\nurl = \"http://h/\"\ntimeout = \"2s\"\n")); err == nil {
		t.Fatal("an explicit timeout longer than interval was accepted")
	}
	d := Defaults()
	d.Collector = "127.0.0.1:7946"
	if err := d.Validate(); err != nil {
		t.Fatalf("Defaults() itself: %v", err)
	}
}
