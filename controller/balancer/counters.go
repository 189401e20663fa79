package balancer

import (
	"context"
	"time"

	"flowweight/controller/dataplane"

	"github.com/netrack/openflow/ofp"
)

type switchCounts struct {
	dpid  uint64
	at    time.Time
	bytes map[uint64]uint64
}

// readCounters reads our flows' byte counters from every switch.
func (b *Balancer) readCounters(ctx context.Context) []switchCounts {
	if b.Config().Collector.ThroughputFrom != "switch" {
		return nil
	}
	b.mu.Lock()
	switches := make([]*switchState, 0, len(b.switches))
	for _, st := range b.switches {
		switches = append(switches, st)
	}
	b.mu.Unlock()
	var out []switchCounts
	for _, st := range switches {
		cctx, cancel := context.WithTimeout(ctx, b.Config().Controller.BarrierTimeout)
		body, err := st.sw.Multipart(cctx, ofp.MultipartTypeFlow, dataplane.OwnFlowsRequest())
		cancel()
		if err != nil {
			b.log.Debug("flow counters unavailable", "dpid", st.sw.String(), "err", err)
			continue
		}
		fc, err := dataplane.DecodeFlowCounters(body)
		if err != nil {
			b.log.Warn("flow counters", "dpid", st.sw.String(), "err", err)
			continue
		}
		c := switchCounts{dpid: st.sw.DatapathID(), at: b.now(), bytes: make(map[uint64]uint64, len(fc))}
		for _, f := range fc {
			c.bytes[f.Cookie] += f.Bytes
		}
		out = append(out, c)
	}
	return out
}

// measureThroughputLocked turns counter deltas of each backend's return flow (the bytes its
// responses carried) into bytes per second, summed over switches.
func (b *Balancer) measureThroughputLocked(counts []switchCounts) {
	rate := map[uint64]float64{}
	for _, c := range counts {
		st, ok := b.switches[c.dpid]
		if !ok {
			continue
		}
		if st.counters != nil && c.at.After(st.countedAt) {
			dt := c.at.Sub(st.countedAt).Seconds()
			for cookie, v := range c.bytes {
				if old, ok := st.counters[cookie]; ok && v >= old {
					rate[cookie] += float64(v-old) / dt
				}
			}
		}
		st.counters, st.countedAt = c.bytes, c.at
	}
	for _, s := range b.services {
		for j := range s.books {
			bk := &s.books[j]
			r, ok := rate[dataplane.MakeCookie(s.index, uint16(j), dataplane.KindReturn)]
			if !ok { // no counter this period: unknown, and the smoothing starts afresh
				bk.thr.Reset()
				bk.throughput = 0
				continue
			}
			bk.throughput = bk.thr.Add(r)
		}
	}
}
