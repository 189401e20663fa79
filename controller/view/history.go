package view

import (
	"sync"
	"time"
)

// History keeps the last points per backend in fixed rings of compact points, allocated in
// full on a backend's first point, so memory does not grow with uptime (the soak test checks).
// Its one writer is the balancer's update loop (Add; Keep at a reload); readers (All) take
// only its own lock, never the balancer's.
type History struct {
	mu     sync.Mutex
	max    int
	series map[string]*series
}

type point struct {
	unixMilli int64
	al        float32
	weight    uint16
}

type series struct {
	pts  []point
	next int // where the next point goes once the ring is full
}

// Add appends p to the named backend's ring.
func (h *History) Add(name string, p Point) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.series == nil {
		h.series = map[string]*series{}
	}
	s := h.series[name]
	if s == nil {
		s = &series{pts: make([]point, 0, h.max)}
		h.series[name] = s
	}
	c := point{unixMilli: p.Time.UnixMilli(), al: float32(p.AL), weight: p.Weight}
	if len(s.pts) < h.max {
		s.pts = append(s.pts, c)
		return
	}
	s.pts[s.next] = c
	s.next = (s.next + 1) % h.max
}

// Keep drops the series of backends that are no longer configured.
func (h *History) Keep(names map[string]bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for n := range h.series {
		if !names[n] {
			delete(h.series, n)
		}
	}
}

func (s *series) points() []Point {
	out := make([]Point, 0, len(s.pts))
	for i := range s.pts {
		c := s.pts[(s.next+i)%len(s.pts)]
		out = append(out, Point{Time: time.UnixMilli(c.unixMilli), Weight: c.weight, AL: float64(c.al)})
	}
	return out
}

// NewHistory keeps the last max points of each backend.
func NewHistory(max int) *History { return &History{max: max} }

// All returns the recent weight and AL points per backend ("service/backend").
func (h *History) All() map[string][]Point {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string][]Point, len(h.series))
	for k, s := range h.series {
		out[k] = s.points()
	}
	return out
}
