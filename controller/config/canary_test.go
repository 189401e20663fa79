package config

import (
	"fmt"
	"testing"
)

func TestCanaryDatapaths(t *testing.T) {
	const shadow = "shadow_policy = \"equal\"\n"
	cases := []struct {
		name  string
		lines string // added after group_id
		want  string // fmt of ParsedCanary
		err   []string
	}{
		{"none", "", "[]", nil},
		{"one", shadow + `canary_datapaths = ["0000000000000002"]`, "[2]", nil},
		{"hex forms", shadow + `canary_datapaths = ["0x2", "0x3"]`, "[2 3]", nil},
		{"placed there", shadow + "datapaths = [\"0x1\", \"0x2\"]\ncanary_datapaths = [\"0x2\"]", "[2]", nil},
		{"without a shadow", `canary_datapaths = ["0x2"]`, "", []string{`service "web".canary_datapaths`, "needs shadow_policy"}},
		{"with reactive", shadow + "dispatch = \"reactive\"\ncanary_datapaths = [\"0x2\"]", "", []string{`service "web".canary_datapaths`, "reactive"}},
		{"not placed there", shadow + "datapaths = [\"0x1\"]\ncanary_datapaths = [\"0x2\"]", "", []string{`service "web".canary_datapaths[0]`, "not one of the service's datapaths"}},
		{"twice", shadow + `canary_datapaths = ["0x2", "0000000000000002"]`, "", []string{`service "web".canary_datapaths[1]`, "canary_datapaths[0] again"}},
		{"not an id", shadow + `canary_datapaths = ["switch2"]`, "", []string{`service "web".canary_datapaths[0]`}},
		{"not a list", shadow + `canary_datapaths = "2"`, "", []string{"canary_datapaths"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkServiceKey(t, tc.lines, tc.err, func(c *Config) string { return fmt.Sprint(c.Services[0].ParsedCanary()) }, tc.want)
		})
	}
}
