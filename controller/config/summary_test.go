package config

import (
	"strconv"
	"strings"
	"testing"

	"flowweight/internal/testutil"
)

// TestSummary: each kind of change is named structurally, in the order services, each
// service, hosts, other keys; a reordering or a key written out at its default is no change;
// secrets never show.
func TestSummary(t *testing.T) {
	api := "\n[[service]]\nname = \"api\"\nvip = \"10.0.0.101\"\nport = 80\ngroup_id = 8\n  [[service.backend]]\n  name = \"c\"\n  ip = \"10.0.0.3\"\n"
	hosts := testutil.Fixture("testdata/hosts.toml")
	for _, tt := range []struct {
		name       string
		prev, next string
		want       string
	}{
		{"nothing", good, good, "no change"},
		{"a default written out", good, "[controller]\nupdate_period = \"5s\"\n# a comment\n" + good, "no change"},
		{"service added", good, good + api, "services: +api"},
		{"service removed", good + api, good, "services: -api"},
		{"capacity", good, edit(`ip = "10.0.0.2"`, "ip = \"10.0.0.2\"\ncapacity = 2"), "web: capacity b 1→2"},
		{"backend added and removed", good, edit("name = \"b\"", "name = \"d\""), "web: +d, -b"},
		{"service key", good, edit("port = 80", "port = 81"), "web: port 80→81, port a 80→81"},
		{"shadow policy added", good, edit("group_id = 7", "group_id = 7\nshadow_policy = \"equal\""), "web: shadow_policy \"\"→equal"},
		{"placement", good, edit("group_id = 7", "group_id = 7\ndatapaths = [\"0x1\", \"0x2\"]"), "web: datapaths []→[0x1 0x2]"},
		{"canary added", edit("group_id = 7", "group_id = 7\nshadow_policy = \"equal\""), edit("group_id = 7", "group_id = 7\nshadow_policy = \"equal\"\ncanary_datapaths = [\"0x2\"]"), "web: canary_datapaths []→[0x2]"},
		{"udp hash", edit("port = 80", "port = 80\nprotocol = \"udp\""), edit("port = 80", "port = 80\nprotocol = \"udp\"\nudp_hash = \"per_address\""), "web: udp_hash per_flow→per_address"},
		{"global keys", good, "[weighting]\nalpha = 0.5\n" + edit(`key_file = "/k"`, "key_file = \"/k\"\nstale_after = \"5s\""),
			"collector.stale_after 15s→5s; weighting.alpha 0.3→0.5"},
		{"nested table", good, "[weighting.load]\ncpu = 0.5\nmem = 0.4\nconn = 0.1\n" + good, "weighting.load.cpu 0.6→0.5; weighting.load.mem 0.3→0.4"},
		{"all at once", good, edit(`ip = "10.0.0.2"`, "ip = \"10.0.0.2\"\ncapacity = 2") + api + "[controller]\nconfig_history = 9\n",
			"services: +api; web: capacity b 1→2; controller.config_history 5→9"},
		{"host capacity shows in the host and every service it backs", hosts, strings.Replace(hosts, "capacity = 2", "capacity = 3", 1),
			"web: capacity fws1 2→3; tls: capacity fws1 2→3; dns: capacity fws1 2→3; host fws1: capacity 2→3"},
		{"host added", hosts, hosts + "[[host]]\nname = \"fws4\"\nip = \"10.0.0.4\"\n", "hosts: +fws4"},
		{"secret", withSNMP("public"), withSNMP("s3cret!"), "web: snmp.community c changed"},
		{"health url password", withSNMP("public"), strings.Replace(withSNMP("public"), "http://10.0.0.3/", "http://u:pw@10.0.0.3/", 1),
			"web: health_url c http://10.0.0.3/→http://u:xxxxx@10.0.0.3/"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			prev, err := Parse("prev.toml", []byte(tt.prev))
			if err != nil {
				t.Fatal(err)
			}
			next, err := Parse("next.toml", []byte(tt.next))
			if err != nil {
				t.Fatal(err)
			}
			if got := Summary(prev, next); got != tt.want {
				t.Errorf("Summary:\n got %s\nwant %s", got, tt.want)
			}
			if strings.Contains(Summary(prev, next), "s3cret") {
				t.Error("the summary shows a secret")
			}
		})
	}
}

// withSNMP is good with a third backend polled over SNMP v2c with community.
func withSNMP(community string) string {
	return good + "  [[service.backend]]\n  name = \"c\"\n  ip = \"10.0.0.3\"\n  source = \"snmp\"\n  health_url = \"http://10.0.0.3/\"\n" +
		"    [service.backend.snmp]\n    version = \"v2c\"\n    community = \"" + community + "\"\n"
}

// TestSummaryBounded: a rewrite of everything is cut to one bounded line, saying so.
func TestSummaryBounded(t *testing.T) {
	prev, err := Parse("prev.toml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString(good)
	for i := range 60 {
		b.WriteString(strings.NewReplacer("api", "api"+string(rune('a'+i%26))+string(rune('a'+i/26)), "10.0.0.101", "10.0.1."+strconv.Itoa(i+1), "group_id = 8", "group_id = "+strconv.Itoa(100+i), "10.0.0.3", "10.0.2."+strconv.Itoa(i+1), "\"c\"", "\"c"+strconv.Itoa(i)+"\"").
			Replace("\n[[service]]\nname = \"api\"\nvip = \"10.0.0.101\"\nport = 80\ngroup_id = 8\n  [[service.backend]]\n  name = \"c\"\n  ip = \"10.0.0.3\"\n"))
	}
	next, err := Parse("next.toml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	got := Summary(prev, next)
	if len(got) > maxSummary+60 || !strings.Contains(got, "more bytes of changes") || !strings.HasPrefix(got, "services: +apiaa +apiba") {
		t.Errorf("Summary of 60 new services (%d bytes): %s", len(got), got)
	}
}
