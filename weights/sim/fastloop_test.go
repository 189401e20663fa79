package sim

import (
	"strings"
	"testing"
)

// TestFastLoopOrdering: in the lab's shape at 80 % load, least_conn weights every 20 ms are
// within 1.5x of per-request least connections, and a 1 s loop is worse than the fixed
// split (the lab's finding). Deterministic: seeded.
func TestFastLoopOrdering(t *testing.T) {
	rows, err := FastLoop(TableOptions{Seeds: []uint64{1}, Jobs: 120_000})
	if err != nil {
		t.Fatal(err)
	}
	p99 := map[string]float64{}
	for _, r := range rows {
		if r.Load == 0.8 {
			p99[r.Label] = r.Runs[0].P99
		}
	}
	lc, fixed := p99["least connections, per request"], p99["oracle fixed split"]
	fast, slow := p99["least_conn weights every 20ms"], p99["least_conn weights every 1s"]
	if !(lc > 0 && fast <= 1.5*lc && slow > fixed && fast < fixed) {
		t.Fatalf("80 %%: per request %.3f, fixed %.3f, every 20ms %.3f, every 1s %.3f", lc, fixed, fast, slow)
	}
	var b strings.Builder
	WriteFastLoop(&b, rows)
	if strings.Count(b.String(), "\n") != 2+len(rows) {
		t.Fatalf("table:\n%s", b.String())
	}
}
