package config

import "testing"

func TestDispatch(t *testing.T) {
	cases := []struct {
		name  string
		lines string // added after group_id
		want  string
		err   []string // substrings; nil: valid
	}{
		{"group by default", "", "group", nil},
		{"group", `dispatch = "group"`, "group", nil},
		{"reactive", `dispatch = "reactive"`, "reactive", nil},
		{"reactive udp", "dispatch = \"reactive\"\nprotocol = \"udp\"", "reactive", nil},
		{"unknown", `dispatch = "random"`, "", []string{`service "web".dispatch`, `"random" is not one of group, reactive`}},
		{"case matters", `dispatch = "Reactive"`, "", []string{`service "web".dispatch`, `"Reactive"`}},
		{"stateless", "mode = \"stateless\"\ndispatch = \"reactive\"", "", []string{`service "web".dispatch`, `needs mode "conntrack"`}},
		{"with affinity", "dispatch = \"reactive\"\naffinity_timeout = \"10s\"", "", []string{`service "web".dispatch`, "affinity_timeout"}},
		{"not a string", `dispatch = 1`, "", []string{"dispatch"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkServiceKey(t, tc.lines, tc.err, func(c *Config) string { return c.Services[0].Dispatch }, tc.want)
		})
	}
}

func TestUDPHash(t *testing.T) {
	cases := []struct {
		name  string
		lines string // added after group_id
		want  string
		err   []string // substrings; nil: valid
	}{
		{"tcp has none", "", "", nil},
		{"udp per flow by default", `protocol = "udp"`, "per_flow", nil},
		{"udp per address", "protocol = \"udp\"\nudp_hash = \"per_address\"", "per_address", nil},
		{"udp per flow", "protocol = \"udp\"\nudp_hash = \"per_flow\"", "per_flow", nil},
		{"stateless udp per flow", "protocol = \"udp\"\nmode = \"stateless\"", "per_flow", nil},
		{"udp with affinity has none", "protocol = \"udp\"\naffinity_timeout = \"10s\"", "", nil},
		{"reactive udp has none", "protocol = \"udp\"\ndispatch = \"reactive\"", "", nil},
		{"unknown", "protocol = \"udp\"\nudp_hash = \"per_port\"", "", []string{`service "web".udp_hash`, `"per_port" is not one of per_flow, per_address`}},
		{"on tcp", `udp_hash = "per_flow"`, "", []string{`service "web".udp_hash`, `protocol is "tcp"`}},
		{"with reactive", "protocol = \"udp\"\ndispatch = \"reactive\"\nudp_hash = \"per_flow\"", "", []string{`service "web".udp_hash`, "reactive"}},
		{"with affinity", "protocol = \"udp\"\naffinity_timeout = \"10s\"\nudp_hash = \"per_address\"", "", []string{`service "web".udp_hash`, "affinity_timeout"}},
		{"not a string", "protocol = \"udp\"\nudp_hash = true", "", []string{"udp_hash"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkServiceKey(t, tc.lines, tc.err, func(c *Config) string { return c.Services[0].UDPHash }, tc.want)
		})
	}
}

func TestShareCorrection(t *testing.T) {
	cases := []struct {
		name  string
		lines string // added after group_id
		want  string
		err   []string // substrings; nil: valid
	}{
		{"on by default", "", "on", nil},
		{"on with affinity", "affinity_timeout = \"10s\"", "on", nil},
		{"off", "affinity_timeout = \"10s\"\nshare_correction = \"off\"", "off", nil},
		{"unknown", `share_correction = "auto"`, "", []string{`service "web".share_correction`, `"auto" is not one of on, off`}},
		{"case matters", `share_correction = "On"`, "", []string{`service "web".share_correction`}},
		{"not a string", `share_correction = true`, "", []string{"share_correction"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkServiceKey(t, tc.lines, tc.err, func(c *Config) string { return c.Services[0].ShareCorrection }, tc.want)
		})
	}
}
