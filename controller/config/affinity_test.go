package config

import (
	"strings"
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
			c, err := Parse("t.toml", []byte(edit(`group_id = 7`, "group_id = 7\n"+tc.lines)))
			if tc.err == nil {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if got := c.Services[0].AffinityTimeout; got != tc.want {
					t.Fatalf("affinity_timeout = %v, want %v", got, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse accepted %q", tc.lines)
			}
			for _, w := range tc.err {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
