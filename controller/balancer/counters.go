package balancer

import (
	"flowweight/controller/dataplane"
)

// measureThroughput takes, per backend, the byte rate of its return flow (the bytes its
// responses carried) from rate (switchsync.Throughput: summed over the switches, by cookie)
// into its smoothed throughput. A backend without a rate this period is unknown, and its
// smoothing starts afresh.
func (s *service) measureThroughput(rate map[uint64]float64) {
	for j := range s.books {
		bk := &s.books[j]
		r, ok := rate[dataplane.MakeCookie(s.index, uint16(j), dataplane.KindReturn)]
		if !ok {
			bk.thr.Reset()
			bk.throughput = 0
			continue
		}
		bk.throughput = bk.thr.Add(r)
	}
}
