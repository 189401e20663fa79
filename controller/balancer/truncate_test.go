package balancer

import (
	"errors"
	"testing"

	"flowweight/controller/config"
)

// TestReloadRefusesEveryCutPrefix cuts the real example at every byte offset and reloads each
// prefix that is still a valid configuration into a controller running the whole file. Every
// prefix that removes anything at all must be refused and change nothing: it is a strict
// prefix of the running file, and most also end mid-line. Five prefixes cut at a line's end
// (removing web3 alone, which the mass-removal rule allows) used to apply.
//
// Without the running content (a file cut short while a *different* content was written),
// only the newline sign is left: the test counts what still applies then, exactly the
// prefixes cut at a line's end that remove one backend of three.
func TestReloadRefusesEveryCutPrefix(t *testing.T) {
	full := exampleWithKey(t)
	base, err := config.Parse("controller.toml", full)
	if err != nil {
		t.Fatal(err)
	}
	// Each prefix is parsed once for both passes. Under the race detector parsing is about
	// ten times slower (three minutes for every byte): it takes every line's end and every
	// 7th byte besides, so every line is still cut in its middle.
	type cut struct {
		n    int
		next *config.Config
	}
	var cuts []cut
	for n := 0; n < len(full); n++ {
		if raceEnabled && n%7 != 0 && (n == 0 || full[n-1] != '\n') {
			continue
		}
		if next, err := config.Parse("prefix", full[:n]); err == nil {
			cuts = append(cuts, cut{n, next})
		}
	}
	for _, known := range []bool{true, false} {
		cfg := base
		b, err := New(cfg, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var running []byte
		if known {
			running = full
		}
		valid, refused, applied := 0, 0, 0
		for _, c := range cuts {
			n, prefix, next := c.n, full[:c.n], c.next
			valid++
			r := config.Compare(cfg, next)
			if !r.Any() {
				continue
			}
			err = b.ReloadFile("controller.toml", prefix, ReloadOptions{Trigger: "test", Running: running})
			var rr *RemovalRefusedError
			if errors.As(err, &rr) {
				refused++
				if b.Config() != cfg {
					t.Fatalf("refused prefix of %d bytes replaced the configuration", n)
				}
				continue
			}
			if err != nil {
				t.Fatalf("prefix of %d bytes: %v", n, err)
			}
			applied++
			if known || config.EndsMidLine(prefix) || r.Mass() || len(r.Backends) != 1 {
				t.Fatalf("prefix of %d bytes (running content known: %v) applied, removing %s", n, known, r)
			}
			if err := b.ReloadFile("controller.toml", full, ReloadOptions{Trigger: "test"}); err != nil {
				t.Fatal(err)
			}
			cfg = b.Config()
		}
		if refused < 1000/(1+6*boolInt(raceEnabled)) || (!known && applied == 0) {
			t.Fatalf("running known %v: %d valid prefixes, %d refused, %d applied: the example changed shape", known, valid, refused, applied)
		}
		t.Logf("running content known %v: %d byte prefixes are valid configurations; %d remove something and were refused; %d applied (cut at a line's end, removing one backend)",
			known, valid, refused, applied)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
