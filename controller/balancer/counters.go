package balancer

import (
	"time"

	"flowweight/controller/dataplane"
	"flowweight/controller/switchsync"
)

// measureThroughput sums, per backend, the byte rates of its return flow (the bytes
// its responses carried) that the syncers measured from their switches' counters since the
// last period. A syncer's rates older than two update periods are not counted: that switch
// stopped answering, and its last rate is not today's. The update calls it with its lock
// held (the books are the services').
func measureThroughput(services []*service, statuses []*switchsync.Status, now time.Time, period time.Duration) {
	rate := map[uint64]float64{}
	for _, st := range statuses {
		if st.RatesAt.IsZero() || now.Sub(st.RatesAt) > 2*period {
			continue
		}
		for cookie, r := range st.Rates {
			rate[cookie] += r
		}
	}
	for _, s := range services {
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
