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
