package balancer

import (
	"flowweight/controller/dataplane"
	"flowweight/controller/switchsync"
)

// measureThroughputLocked sums, per backend, the byte rates of its return flow (the bytes
// its responses carried) that the syncers measured from their switches' counters since the
// last period. A syncer's rates older than two update periods are not counted: that switch
// stopped answering, and its last rate is not today's. b.mu must be held.
func (b *Balancer) measureThroughputLocked(statuses []*switchsync.Status) {
	rate := map[uint64]float64{}
	now := b.now()
	for _, st := range statuses {
		if st.RatesAt.IsZero() || now.Sub(st.RatesAt) > 2*b.cfg.Controller.UpdatePeriod {
			continue
		}
		for cookie, r := range st.Rates {
			rate[cookie] += r
		}
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
