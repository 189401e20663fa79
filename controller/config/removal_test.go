package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRemovalRule(t *testing.T) {
	svc := func(name string, backends ...string) string {
		var b strings.Builder
		b.WriteString("[[service]]\nname = \"" + name + "\"\nvip = \"10.0.0." + map[string]string{"web": "100", "api": "101"}[name] + "\"\nport = 80\ngroup_id = " + map[string]string{"web": "1", "api": "2"}[name] + "\n")
		for _, be := range backends {
			b.WriteString("  [[service.backend]]\n  name = \"" + be + "\"\n  ip = \"10.0.1." + be[len(be)-1:] + "\"\n")
		}
		return b.String()
	}
	head := "[collector]\nkey_file = \"/k\"\n"
	running := mustParse(t, head+svc("web", "w1", "w2", "w3", "w4")+svc("api", "a5", "a6"))
	cases := []struct {
		name      string
		next      string
		mass      bool
		services  int
		emptied   int
		backends  int
		mentioned string
	}{
		{"empty file", "", true, 2, 0, 6, "services api, web"},
		{"only the head", head, true, 2, 0, 6, "services api, web"},
		{"unchanged", head + svc("web", "w1", "w2", "w3", "w4") + svc("api", "a5", "a6"), false, 0, 0, 0, "nothing"},
		{"one backend less", head + svc("web", "w1", "w2", "w3") + svc("api", "a5", "a6"), false, 0, 0, 1, "web/w4"},
		{"exactly half removed", head + svc("web", "w1", "w2") + svc("api", "a5"), false, 0, 0, 3, "3 of 6"},
		{"more than half removed", head + svc("web", "w1") + svc("api", "a5"), true, 0, 0, 4, "4 of 6"},
		{"last service cut off", head + svc("web", "w1", "w2", "w3", "w4"), true, 1, 0, 2, "services api"},
		{"service emptied and refilled", head + svc("web", "w1", "w2", "w3", "w4") + svc("api", "a7"), true, 0, 1, 2, "every backend of services api"},
		{"backend moved to another service counts as emptied there", head + svc("web", "w1", "w2", "w3") + svc("api", "w4"), true, 0, 1, 2, "api"},
		{"additions only", head + svc("web", "w1", "w2", "w3", "w4", "w7") + svc("api", "a5", "a6", "a8"), false, 0, 0, 0, "nothing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			next, err := Parse("next.toml", []byte(tc.next))
			if err != nil {
				t.Fatal(err)
			}
			r := Compare(running, next)
			if r.Mass() != tc.mass || len(r.Services) != tc.services || len(r.Emptied) != tc.emptied || len(r.Backends) != tc.backends || r.Running != 6 {
				t.Fatalf("removal %+v: mass %v, want mass %v services %d emptied %d backends %d", r, r.Mass(), tc.mass, tc.services, tc.emptied, tc.backends)
			}
			if !strings.Contains(r.String(), tc.mentioned) {
				t.Fatalf("description %q does not mention %q", r.String(), tc.mentioned)
			}
		})
	}
}

// TestRemovalTruncatedExample cuts the real example file after every line. The example has
// one service of three backends, so a prefix is refused exactly when it has no service or
// fewer than two of the three backends: this oracle counts the prefix's backends itself
// rather than asking the rule.
func TestRemovalTruncatedExample(t *testing.T) {
	path := filepath.Join("..", "..", "configs", "controller.toml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	full := mustParse(t, string(data))
	if len(full.Services) != 1 || len(full.Services[0].Backends) != 3 {
		t.Fatalf("the oracle assumes one service of three backends; update it: %+v", full.Services)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(string(data), "\n"), "\n") // the last line keeps no newline
	valid, refused := 0, 0
	for n := 0; n <= len(lines); n++ {
		prefix := strings.Join(lines[:n], "")
		next, err := Parse("prefix.toml", []byte(prefix))
		if err != nil {
			continue
		}
		valid++
		kept := 0
		if len(next.Services) == 1 {
			kept = len(next.Services[0].Backends)
		}
		wantRefused := len(next.Services) == 0 || kept < 2
		r := Compare(full, next)
		if r.Mass() != wantRefused {
			t.Errorf("prefix of %d lines (%d services, %d backends): Mass() = %v, want %v (%s)", n, len(next.Services), kept, r.Mass(), wantRefused, r)
		}
		if r.Mass() {
			refused++
		}
	}
	t.Logf("%d of %d line prefixes are valid; %d of them are refused without -allow-removal", valid, len(lines)+1, refused)
	if valid < 10 || refused == 0 {
		t.Fatalf("only %d valid prefixes, %d refused: the example changed shape", valid, refused)
	}
}

func mustParse(t *testing.T, text string) *Config {
	t.Helper()
	c, err := Parse("t.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return c
}
