package agentcheck

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"flowweight/internal/report"
)

type recorder struct {
	got [][]byte
	err error
}

func (r *recorder) Send(d []byte) error {
	r.got = append(r.got, bytes.Clone(d))
	return r.err
}

func TestTap(t *testing.T) {
	key := []byte("tap-test-key-0123456789abcdef")
	seal := func(flags report.Flags, cpu float64, herr string) []byte {
		r := report.Report{
			BackendID: "web1", BootNonce: 7, Seq: 1, Time: time.Unix(1_700_000_000, 0),
			Interval: time.Second, Flags: flags, CPUUtil: cpu, CPUCount: 2, MemUtil: 0.5,
			MemBytes: 1 << 30, HealthError: herr,
		}
		if herr != "" {
			r.HealthStatus = 503
		}
		b, err := r.AppendSeal(nil, key)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name    string
		dgram   []byte
		sendErr error
		want    string // the server's reply afterwards
		openErr uint64
	}{
		{"healthy", seal(report.FlagHealthOK, 0.2, ""), nil, "up ready 80%\n", 0},
		{"drained", seal(report.FlagHealthOK|report.FlagDrain, 0.2, ""), nil, "up drain\n", 0},
		{"unhealthy", seal(0, 0.2, "GET http://127.0.0.1/: status 503"), nil,
			"down ready #health check failed: GET http://127.0.0.1/: status 503\n", 0},
		{"collector unreachable still updates", seal(report.FlagHealthOK, 0.9, ""), errors.New("connection refused"), "up ready 10%\n", 0},
		{"unreadable datagram keeps the last answer, still sent", []byte("junk"), nil, "up ready 10%\n", 1},
	}
	srv := &Server{}
	next := &recorder{}
	tap := &Tap{Next: next, Key: key, Weigher: Weigher{CPU: 1, Floor: 1}, Server: srv}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next.err = tt.sendErr
			if err := tap.Send(tt.dgram); err != tt.sendErr {
				t.Errorf("Send = %v, want the next sender's %v", err, tt.sendErr)
			}
			if len(next.got) != i+1 || !bytes.Equal(next.got[i], tt.dgram) {
				t.Errorf("next sender did not get the datagram unchanged")
			}
			if got := string(*srv.reply.Load()); got != tt.want {
				t.Errorf("reply %q, want %q", got, tt.want)
			}
			if got := tap.OpenErrors.Load(); got != tt.openErr {
				t.Errorf("OpenErrors = %d, want %d", got, tt.openErr)
			}
		})
	}
}

// TestTapIgnoresInFlightReports: HAProxy's agent weight follows the full reports; an
// in-flight report between them (another connection count) leaves the reply as it was.
func TestTapIgnoresInFlightReports(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	srv := &Server{}
	tap := &Tap{Key: key, Server: srv, Weigher: Weigher{CPU: 0.5, Conn: 0.5, MaxConns: 100, Floor: 1}, Next: &recorder{}}
	full := report.Report{BackendID: "web1", BootNonce: 1, Seq: 1, Time: time.Unix(1e9, 0), Interval: time.Second, Flags: report.FlagHealthOK,
		CPUUtil: 0.5, CPUCount: 2, MemUtil: 0.2, MemBytes: 1 << 30, Conns: 3}
	b, err := full.AppendSeal(nil, key)
	if err != nil {
		t.Fatal(err)
	}
	tap.Send(b)
	want := string(*srv.reply.Load())
	in := full
	in.Seq, in.Conns, in.Signals = 2, 90, report.SignalInFlight
	if b, err = in.AppendSeal(nil, key); err != nil {
		t.Fatal(err)
	}
	tap.Send(b)
	if got := string(*srv.reply.Load()); got != want {
		t.Fatalf("after an in-flight report: %q, want %q", got, want)
	}
}
