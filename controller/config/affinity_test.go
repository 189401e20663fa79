package config

import (
	"testing"
	"time"
)

func TestAffinityTimeout(t *testing.T) {
	cases := []struct {
		name  string
		lines string // added after group_id
		want  time.Duration
		err   []string // substrings; nil: valid
	}{
		{"off by default", "", 0, nil},
		{"ten minutes", `affinity_timeout = "10m"`, 10 * time.Minute, nil},
		{"the largest", `affinity_timeout = "65535s"`, 65535 * time.Second, nil},
		{"explicit conntrack", "mode = \"conntrack\"\naffinity_timeout = \"3s\"", 3 * time.Second, nil},
		{"negative", `affinity_timeout = "-1s"`, 0, []string{`service "web".affinity_timeout`, "negative"}},
		{"fractional", `affinity_timeout = "1.5s"`, 0, []string{`service "web".affinity_timeout`, "whole number of seconds"}},
		{"milliseconds", `affinity_timeout = "500ms"`, 0, []string{`service "web".affinity_timeout`, "whole number of seconds"}},
		{"above 65535 s", `affinity_timeout = "65536s"`, 0, []string{`service "web".affinity_timeout`, "above 18h12m15s", "65535 s"}},
		{"a day", `affinity_timeout = "24h"`, 0, []string{`service "web".affinity_timeout`, "above"}},
		{"stateless", "mode = \"stateless\"\naffinity_timeout = \"10m\"", 0, []string{`service "web".affinity_timeout`, `needs mode "conntrack"`}},
		{"not a duration", `affinity_timeout = "soon"`, 0, []string{"affinity_timeout", "soon"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkServiceKey(t, tc.lines, tc.err, func(c *Config) time.Duration { return c.Services[0].AffinityTimeout }, tc.want)
		})
	}
}
