package agentcheck

import (
	"strings"
	"testing"

	"flowweight/internal/report"
)

func TestReply(t *testing.T) {
	tests := []struct {
		name string
		s    Status
		want string
	}{
		{"healthy", Status{Healthy: true, Percent: 73}, "up ready 73%\n"},
		{"healthy full", Status{Healthy: true, Percent: 100}, "up ready 100%\n"},
		{"healthy zero", Status{Healthy: true, Percent: 0}, "up ready 0%\n"},
		{"percent clamped high", Status{Healthy: true, Percent: 250}, "up ready 100%\n"},
		{"percent clamped low", Status{Healthy: true, Percent: -5}, "up ready 0%\n"},
		{"drained keeps weight", Status{Healthy: true, Drained: true, Percent: 40}, "up drain\n"},
		{"down", Status{Percent: 90}, "down ready\n"},
		{"down with reason", Status{Reason: "health check failed: status 503"}, "down ready #health check failed: status 503\n"},
		{"down and drained", Status{Drained: true, Reason: "x"}, "down drain #x\n"},
		{"reason on healthy ignored", Status{Healthy: true, Percent: 5, Reason: "old"}, "up ready 5%\n"},
		{"reason line breaks", Status{Reason: "a\r\nb\x00c\xffd"}, "down ready #a??b?c?d\n"},
		{"reason blank", Status{Reason: "   "}, "down ready\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Reply(tt.s); got != tt.want {
				t.Errorf("Reply(%+v) = %q, want %q", tt.s, got, tt.want)
			}
		})
	}
}

// HAProxy reads up to the first CR or LF: a reply must be exactly one line of bounded size,
// whatever the reason holds.
func TestReplyOneLine(t *testing.T) {
	long := strings.Repeat("é\n#", 200)
	got := Reply(Status{Drained: true, Reason: long})
	if strings.IndexAny(got, "\r\n") != len(got)-1 {
		t.Errorf("reply %q is not one line", got)
	}
	if len(got) > len("down drain #\n")+MaxReason {
		t.Errorf("reply is %d bytes, reason not cut to %d", len(got), MaxReason)
	}
}

func TestWeigher(t *testing.T) {
	hostLoad := Weigher{CPU: 0.7, Mem: 0.3, Floor: 1}
	connLoad := Weigher{Conn: 1, MaxConns: 4, Floor: 1}
	mixed := Weigher{CPU: 0.5, Mem: 0.2, Conn: 0.3, MaxConns: 100, Floor: 10}
	tests := []struct {
		name string
		w    Weigher
		r    report.Report
		load float64
		pct  int
	}{
		{"idle", hostLoad, report.Report{}, 0, 100},
		{"cpu and mem", hostLoad, report.Report{CPUUtil: 0.5, MemUtil: 0.2}, 0.41, 59},
		{"rounds to nearest", hostLoad, report.Report{CPUUtil: 0.52}, 0.364, 64},
		{"full load hits the floor", hostLoad, report.Report{CPUUtil: 1, MemUtil: 1}, 1, 1},
		{"conns ignored with coefficient 0", hostLoad, report.Report{Conns: 1000}, 0, 100},
		{"one of four conns", connLoad, report.Report{Conns: 1, CPUUtil: 1}, 0.25, 75},
		{"conns above max count as full", connLoad, report.Report{Conns: 9}, 1, 1},
		{"mixed", mixed, report.Report{CPUUtil: 0.4, MemUtil: 0.5, Conns: 50}, 0.45, 55},
		{"mixed floor", mixed, report.Report{CPUUtil: 1, MemUtil: 0.9, Conns: 90}, 0.95, 10},
		{"floor zero allows zero", Weigher{CPU: 1}, report.Report{CPUUtil: 1}, 1, 0},
		{"out of range input clamped", hostLoad, report.Report{CPUUtil: 3, MemUtil: -1}, 0.7, 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.w.Load(&tt.r); got < tt.load-1e-9 || got > tt.load+1e-9 {
				t.Errorf("Load = %v, want %v", got, tt.load)
			}
			if got := tt.w.Percent(&tt.r); got != tt.pct {
				t.Errorf("Percent = %d, want %d", got, tt.pct)
			}
		})
	}
}

func TestWeigherStatus(t *testing.T) {
	w := Weigher{CPU: 1, Floor: 1}
	tests := []struct {
		name string
		r    report.Report
		want Status
	}{
		{"healthy", report.Report{Flags: report.FlagHealthOK, CPUUtil: 0.25}, Status{Healthy: true, Percent: 75}},
		{"drained", report.Report{Flags: report.FlagHealthOK | report.FlagDrain}, Status{Healthy: true, Drained: true, Percent: 100}},
		{"leaving keeps the state", report.Report{Flags: report.FlagHealthOK | report.FlagLeaving}, Status{Healthy: true, Percent: 100}},
		{"leaving drained stays drained", report.Report{Flags: report.FlagHealthOK | report.FlagLeaving | report.FlagDrain}, Status{Healthy: true, Drained: true, Percent: 100}},
		{"unhealthy with error", report.Report{HealthStatus: 503, HealthError: "GET http://127.0.0.1/healthz: status 503"},
			Status{Percent: 100, Reason: "health check failed: GET http://127.0.0.1/healthz: status 503"}},
		{"unhealthy without error", report.Report{}, Status{Percent: 100, Reason: "health check failed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := w.Status(&tt.r); got != tt.want {
				t.Errorf("Status = %+v, want %+v", got, tt.want)
			}
		})
	}
}
