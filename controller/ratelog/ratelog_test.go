package ratelog

import (
	"bytes"
	"encoding/json"
	"flowweight/internal/testutil"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func lines(buf *bytes.Buffer) []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		m := map[string]any{}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			panic(err)
		}
		out = append(out, m)
	}
	buf.Reset()
	return out
}

func TestLimiter(t *testing.T) {
	var buf bytes.Buffer
	clk := testutil.NewClock(time.Unix(1_800_000_000, 0))
	l := New(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), clk.Now)
	steps := []struct {
		advance time.Duration
		key     string
		n       int     // calls
		lines   int     // lines written
		supp    float64 // "suppressed" on the last line written
	}{
		{0, "a", 1000, 1, 0},
		{time.Second, "a", 5, 0, 0},
		{0, "b", 3, 1, 0}, // another key has its own window
		{Every - time.Second, "a", 1, 1, 1004},
		{Every - time.Nanosecond, "a", 1, 0, 0},
		{time.Nanosecond, "a", 1, 1, 1},
		{-2 * Every, "a", 1, 1, 0}, // clock stepped back past the window
	}
	for i, st := range steps {
		clk.Advance(st.advance)
		for j := 0; j < st.n; j++ {
			l.Warn(st.key, "bad thing", "reason", st.key)
		}
		got := lines(&buf)
		if len(got) != st.lines {
			t.Fatalf("step %d: %d lines, want %d", i, len(got), st.lines)
		}
		if st.lines > 0 {
			if s := got[len(got)-1]["suppressed"]; s != st.supp {
				t.Errorf("step %d: suppressed = %v, want %v", i, s, st.supp)
			}
		}
	}
}

func TestLimiterBoundsKeys(t *testing.T) {
	var buf bytes.Buffer
	clk := testutil.NewClock(time.Unix(1_800_000_000, 0))
	l := New(slog.New(slog.NewJSONHandler(&buf, nil)), clk.Now)
	for i := 0; i < 10*MaxKeys; i++ {
		l.Warn(fmt.Sprint("key", i), "line")
	}
	if n := len(l.slots); n != MaxKeys+1 {
		t.Errorf("%d slots after %d keys, want %d (MaxKeys plus overflow)", n, 10*MaxKeys, MaxKeys+1)
	}
	if got := len(lines(&buf)); got != MaxKeys+1 {
		t.Errorf("%d lines, want %d", got, MaxKeys+1)
	}
}

func TestLimiterDisabledLevelCostsNothing(t *testing.T) {
	var buf bytes.Buffer
	l := New(slog.New(slog.NewJSONHandler(&buf, nil)), nil) // Info and up
	if l.Debug("k", "hidden") {
		t.Error("Debug line written below the handler's level")
	}
	if len(l.slots) != 0 || buf.Len() != 0 {
		t.Errorf("disabled level touched state: %d slots, %q", len(l.slots), buf.String())
	}
}

// TestLimiterReusesIdleKeys: keys that come and go (one per short-lived switch) do not end in
// the shared overflow slot forever: once their window is over, new keys take their place.
func TestLimiterReusesIdleKeys(t *testing.T) {
	var buf bytes.Buffer
	clk := testutil.NewClock(time.Unix(1_800_000_000, 0))
	l := New(slog.New(slog.NewJSONHandler(&buf, nil)), clk.Now)
	for i := 0; i < MaxKeys; i++ {
		l.Warn(fmt.Sprint("old", i), "line")
	}
	l.Warn("new-now", "line") // all windows still open: overflow
	clk.Advance(Every)
	for i := 0; i < MaxKeys; i++ {
		if !l.Warn(fmt.Sprint("new", i), "line") {
			t.Fatalf("new key %d suppressed although every old key's window is over", i)
		}
	}
	if _, ok := l.slots["new0"]; !ok || len(l.slots) > MaxKeys+1 {
		t.Errorf("slots %d, new0 present %v", len(l.slots), ok)
	}
}
