package ofswitch

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"flowweight/controller/ratelog"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// TestRateLimitsOutliveSessions: a peer that reconnects in a loop, under one datapath id or
// cycling ids from one address, gets one line per kind per ratelog.Every, not one per
// session: before the fix the limiter lived in the session, and 40 reconnects wrote 40
// description lines and 40 "bad packet-in" lines. The next line after the window reports
// what was held back.
func TestRateLimitsOutliveSessions(t *testing.T) {
	const n = 40
	tests := []struct {
		name string
		dpid func(i int) uint64
	}{
		{"one datapath id reconnecting", func(int) uint64 { return 0x700 }},
		{"one source cycling datapath ids", func(i int) uint64 { return 0x800 + uint64(i) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf syncBuffer
			h := newRecHandler()
			srv, clk := testServer(t, Config{Logger: slog.New(slog.NewJSONHandler(&buf, nil))}, h)
			session := func(i int) {
				f, sw := connectFake(t, srv, h, tt.dpid(i))
				f.send(of.TypePacketIn, 0, []byte{1, 2, 3})
				if _, err := sw.Multipart(context.Background(), ofp.MultipartTypeGroupDescription, nil); err != nil {
					t.Fatal(err) // a round trip: the bad packet-in has been read
				}
				f.conn.Close()
				h.wait(t, "disconnected")
			}
			for i := range n {
				session(i)
			}
			for _, msg := range []string{"switch description", "bad packet-in"} {
				if got, _ := jsonLines(t, &buf, msg); got != 1 {
					t.Errorf("%q: %d lines for %d sessions, want 1", msg, got, n)
				}
			}
			if got := srv.Stats().Faults[FaultMalformedPacketIn]; got != n {
				t.Errorf("malformed_packet_in = %d, want every one counted (%d)", got, n)
			}
			clk.Advance(ratelog.Every)
			session(n)
			for _, msg := range []string{"switch description", "bad packet-in"} {
				if got, last := jsonLines(t, &buf, msg); got != 2 || last["suppressed"] != float64(n-1) {
					t.Errorf("%q: %d lines, last %v; want 2, the last with suppressed=%d", msg, got, last, n-1)
				}
			}
		})
	}
}

// TestPeerLogBounded: scopes that come and go (new sources, new ids) cannot grow the
// limiter past its bound, nor buy more than one extra line per kind per window once it is
// full; a full table makes room for new scopes as the old windows end.
func TestPeerLogBounded(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	l := newPeerLog(func() time.Time { return now })
	l.max = 8
	lg := slog.New(slog.NewTextHandler(io.Discard, nil))
	written := 0
	for i := range 1000 {
		if l.Log(lg, slog.LevelWarn, "bad_thing", fmt.Sprintf("192.0.2.%d", i%250), fmt.Sprintf("%016x", i), "bad thing") {
			written++
		}
		if len(l.slots) > l.max {
			t.Fatalf("%d scopes tracked, bound %d", len(l.slots), l.max)
		}
	}
	// 8 slots hold 4 lines (source and id each), and the overflow slot one more.
	if written != 5 {
		t.Errorf("%d lines for 1,000 new scopes in one window, want 5", written)
	}
	now = now.Add(ratelog.Every)
	if !l.Log(lg, slog.LevelWarn, "bad_thing", "198.51.100.1", "00000000000fffff", "bad thing") {
		t.Error("a new scope after the window is held back: the table did not make room")
	}
}

// TestPeerLogScopes: a line is held back by its source or by its datapath id, and reports
// what its scopes held back.
func TestPeerLogScopes(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	l := newPeerLog(func() time.Time { return now })
	var buf syncBuffer
	lg := slog.New(slog.NewJSONHandler(&buf, nil))
	steps := []struct {
		src, dpid string
		advance   time.Duration
		written   bool
	}{
		{"192.0.2.1", "01", 0, true},
		{"192.0.2.1", "02", 0, false},            // same source
		{"192.0.2.2", "01", 0, false},            // same id from elsewhere
		{"192.0.2.3", "03", 0, true},             // neither seen
		{"", "", 0, true},                        // no scope known: its own
		{"", "", time.Second, false},             //   ... and held back
		{"192.0.2.1", "01", ratelog.Every, true}, // the window is over
	}
	for i, s := range steps {
		now = now.Add(s.advance)
		if got := l.Log(lg, slog.LevelWarn, "k", s.src, s.dpid, "line"); got != s.written {
			t.Errorf("step %d (%s, %s): written %v, want %v", i, s.src, s.dpid, got, s.written)
		}
	}
	if got, last := jsonLines(t, &buf, "line"); got != 4 || last["suppressed"] != float64(2) {
		t.Errorf("%d lines, last %v; want 4, the last with suppressed=2", got, last)
	}
}
