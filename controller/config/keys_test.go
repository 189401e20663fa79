package config

import (
	"strings"
	"testing"
)

// keyed is the good config with its [collector] key lines replaced.
func keyed(collector string) string {
	return strings.Replace(good, "[collector]\nkey_file = \"/k\"", "[collector]\n"+collector, 1)
}

func TestKeyModes(t *testing.T) {
	tests := []struct {
		name      string
		toml      string
		err       []string // substrings of the error; nil: valid
		mode      string
		warnings  []string // substrings, one warning each
		noWarning bool
	}{
		{"secret file: derived", keyed(`secret_file = "/s"`), nil, KeyModeDerived, nil, true},
		{"explicit derived", keyed("secret_file = \"/s\"\nkey_mode = \"derived\""), nil, KeyModeDerived, nil, true},
		{"old config: key_file alone is shared, warned with the rewrite", good, nil, KeyModeShared,
			[]string{`collector.key_file: no secret_file, so key_mode defaults to "shared"`, "a, b", `replace key_file = "/k" with secret_file`, "controller key -config"}, false},
		{"explicit shared, warned", keyed("key_file = \"/k\"\nkey_mode = \"shared\""), nil, KeyModeShared,
			[]string{`key_mode is "shared"`, "forge reports for every backend"}, false},
		{"both files", keyed("key_file = \"/k\"\nsecret_file = \"/s\""), []string{"collector.key_file", "not both"}, "", nil, false},
		{"derived with a shared key", keyed("key_file = \"/k\"\nkey_mode = \"derived\""), []string{"collector.key_file", "set secret_file instead"}, "", nil, false},
		{"shared with a secret", keyed("secret_file = \"/s\"\nkey_mode = \"shared\""), []string{"collector.secret_file", `key_mode is "shared"`}, "", nil, false},
		{"shared without key_file", keyed(`key_mode = "shared"`), []string{"collector.key_file", "required"}, "", nil, false},
		{"bad mode", keyed("secret_file = \"/s\"\nkey_mode = \"per-backend\""), []string{"collector.key_mode", `"per-backend"`}, "", nil, false},
		{"only some backends have their own key", keyed("") + "  key_file = \"/kb\"\n",
			[]string{"collector.secret_file", "probe backend(s) a have no key_file"}, "", nil, false},
		{"every backend has its own key", strings.Replace(keyed(""), "name = \"a\"\n", "name = \"a\"\n  key_file = \"/ka\"\n", 1) + "  key_file = \"/kb\"\n",
			nil, KeyModeDerived, nil, true},
		{"own key files, one shared by two backends",
			strings.Replace(keyed(`secret_file = "/s"`), "name = \"a\"\n", "name = \"a\"\n  key_file = \"/same\"\n", 1) + "  key_file = \"/same\"\n",
			nil, KeyModeDerived, []string{"key_file /same is the key of the backends a, b"}, false},
		{"a backend's key file is the controller secret",
			strings.Replace(keyed(`secret_file = "/s"`), "name = \"a\"\n", "name = \"a\"\n  key_file = \"/s\"\n", 1),
			[]string{`backend "a".key_file`, "controller's secret"}, "", nil, false},
		{"shared: a backend naming the shared file explicitly shares it too",
			strings.Replace(good, "name = \"a\"\n", "name = \"a\"\n  key_file = \"/k\"\n", 1), nil, KeyModeShared,
			[]string{"the 2 probe backend(s) a, b all use the key in /k"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("t.toml", []byte(tt.toml))
			if tt.err != nil {
				if err == nil {
					t.Fatal("accepted")
				}
				for _, w := range tt.err {
					if !strings.Contains(err.Error(), w) {
						t.Fatalf("error does not say %q:\n%v", w, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Collector.EffectiveKeyMode(); got != tt.mode {
				t.Errorf("mode %q, want %q", got, tt.mode)
			}
			w := c.Warnings()
			if tt.noWarning && len(w) != 0 {
				t.Errorf("warnings %q, want none", w)
			}
			if tt.warnings != nil {
				if len(w) != 1 {
					t.Fatalf("warnings %q, want one", w)
				}
				for _, s := range tt.warnings {
					if !strings.Contains(w[0], s) {
						t.Errorf("warning does not say %q:\n%s", s, w[0])
					}
				}
			}
		})
	}
}
