package agentcheck

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"flowweight/collector/report"
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
