package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	cases := []struct {
		name, table string
		jobs        int
		want        []string // substrings of the output
		err         string
	}{
		{"quality", "quality", 100_000, []string{"#### Targets", "| dynamic |", "| headroom |", "Scenario B", "Scenario C", "| best fixed split |"}, ""},
		{"too few jobs for the warm-up", "quality", 20_000, nil, "no job arrived after the warm-up of 20m0s"},
		{"oscillation", "oscillation", 1, []string{"### Settling after a load step", "| dead_band=0 | 2 |"}, ""},
		{"unknown table", "fast", 1000, nil, `-table "fast"`},
		{"no jobs", "quality", 0, nil, "-jobs 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(&out, 1, c.jobs, c.table, false)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want it to contain %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

func TestRunSeeds(t *testing.T) {
	var out bytes.Buffer
	if err := runSeeds(&out, 1, 2, 100_000, true); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"| 0.95 | B | headroom (default) |", "| 0.80 | C | headroom, learn.rate 0.1 |", "of 2 |"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
	if strings.Contains(out.String(), "| oracle |") {
		t.Error("the oracle is the reference, not a row")
	}
	for _, bad := range []struct {
		n, jobs int
		want    string
	}{{0, 1000, "-seeds 0"}, {3, 0, "-jobs 0"}} {
		if err := runSeeds(&out, 1, bad.n, bad.jobs, false); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("runSeeds(n=%d, jobs=%d) = %v, want %q", bad.n, bad.jobs, err, bad.want)
		}
	}
}
