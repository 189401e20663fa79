package switchsync

import (
	"context"
	"time"

	"flowweight/controller/dataplane"
	"flowweight/controller/dispatch"
	"flowweight/controller/ofswitch"
	"flowweight/controller/ratelog"

	"github.com/prometheus/client_golang/prometheus"
)

// Reactive dispatch (dataplane/dispatch.go): the first frame of each new connection of a
// reactive service comes to the controller, which chooses its backend (controller/dispatch)
// and sends the frame back, marked for that backend.
//
// The packet-out goes from the packet-in's goroutine, not through Run: it carries the
// client's own frame and writes nothing the syncer plans (no flow, no group, so nothing a
// read-back could find drifted), and a connection must not wait behind a sync's barriers.
// The pick flows it relies on are the syncer's, planned from the same located services the
// choice is made from (Status.Planned), so a backend not yet located here is never chosen.

// DispatchConfig is what reactive dispatch on a switch needs; the zero value dispatches nothing.
type DispatchConfig struct {
	Dispatcher *dispatch.Dispatcher // shared by every switch: the counts are the fleet's
	Metrics    DispatchMetrics
	Limited    *ratelog.Limiter // the per-packet warnings, at most one per reason per ratelog.Every
}

// DispatchMetrics counts what dispatch did; nil fields are not counted.
type DispatchMetrics struct {
	// Dispatched counts connections sent on, by service, backend and how the backend was
	// chosen (DispatchLeastConn, DispatchRoundRobin).
	Dispatched *prometheus.CounterVec
	// Dropped counts first frames that were not sent on, by service and DispatchDrop reason.
	Dropped *prometheus.CounterVec
	// Seconds observes the time from the packet-in to the packet-out queued.
	Seconds prometheus.Observer
}

// How a backend was chosen (DispatchMetrics.Dispatched's "by" label).
const (
	DispatchLeastConn  = "least_conn"
	DispatchRoundRobin = "round_robin"
)

// Why a first frame was dropped (DispatchMetrics.Dropped's "reason" label).
const (
	DispatchNoService = "no_service" // the cookie names no reactive service placed here
	DispatchNoBackend = "no_backend" // no backend has weight and a location on this switch
	DispatchTruncated = "truncated"  // the switch sent part of the frame only
	DispatchNotSent   = "not_sent"   // the packet-out failed
)

// dispatchConn chooses the backend of the connection whose first frame pi carries and sends
// the frame back to the switch marked for it.
func (s *Syncer) dispatchConn(pi ofswitch.PacketIn) {
	cfg := s.cfg.Dispatch
	if cfg.Dispatcher == nil || !s.mayAsk() {
		return
	}
	start := time.Now()
	idx, _, _, _ := dataplane.ParseCookie(pi.Cookie)
	var svc *dataplane.Service
	if st := s.status.Load(); st != nil {
		for i := range st.Planned {
			if p := &st.Planned[i]; p.Index == idx && p.Dispatch == dataplane.DispatchReactive {
				svc = p
				break
			}
		}
	}
	name := "-"
	if svc != nil {
		name = svc.Name
	}
	drop := func(reason string, args ...any) {
		if m := cfg.Metrics.Dropped; m != nil {
			m.WithLabelValues(name, reason).Inc()
		}
		if cfg.Limited != nil {
			cfg.Limited.Warn("dispatch "+reason+" "+s.cfg.Conn.String(), "new connection not dispatched",
				append([]any{"dpid", s.cfg.Conn.String(), "service", name, "reason", reason}, args...)...)
		}
	}
	switch {
	case svc == nil:
		drop(DispatchNoService, "cookie", pi.Cookie)
		return
	case int(pi.TotalLen) != len(pi.Data):
		drop(DispatchTruncated, "frame", pi.TotalLen, "received", len(pi.Data))
		return
	}
	c, ok := cfg.Dispatcher.Choose(svc)
	if !ok {
		drop(DispatchNoBackend)
		return
	}
	timeout := 5 * time.Second
	if in := s.latest.Load(); in != nil && in.BarrierTimeout > 0 {
		timeout = in.BarrierTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	err := s.cfg.Conn.PacketOut(ctx, pi.InPort, dataplane.DispatchActions(c.Backend), pi.Data)
	cancel()
	if err != nil {
		drop(DispatchNotSent, "backend", c.Name, "err", err)
		return
	}
	if m := cfg.Metrics.Dispatched; m != nil {
		by := DispatchRoundRobin
		if c.LeastConn {
			by = DispatchLeastConn
		}
		m.WithLabelValues(svc.Name, c.Name, by).Inc()
	}
	if o := cfg.Metrics.Seconds; o != nil {
		o.Observe(time.Since(start).Seconds())
	}
}
