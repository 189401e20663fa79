package sim

import (
	"math"
	"strings"
	"testing"
	"time"
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
		if r.Load == 0.8 && r.Pool == "FCFS" {
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

// TestCFSQuota: a 0.125-core quota in 100 ms periods, bursting at one core, runs six 2 ms
// jobs back to back, and the seventh uses the last 0.5 ms of the period and finishes 1.5 ms
// into the next one.
func TestCFSQuota(t *testing.T) {
	st := newStation(Backend{Name: "q", Speed: 0.125, CFSPeriod: 100 * time.Millisecond}, nil, 0, 1)
	var f float64
	for i := range 7 {
		f = st.serve(0, 0.002)
		if i < 6 && math.Abs(f-0.002*float64(i+1)) > 1e-12 {
			t.Fatalf("job %d finishes at %v", i, f)
		}
	}
	if math.Abs(f-0.1015) > 1e-12 {
		t.Fatalf("the seventh job finishes at %v, want 0.1015", f)
	}
	if got := st.serve(0.35, 0.001); math.Abs(got-0.351) > 1e-12 {
		t.Fatalf("a job in a fresh period: %v", got)
	}
}
