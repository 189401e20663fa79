package sim

import (
	"math/rand/v2"
)

// dispatcher chooses the backend of each arriving job.
type dispatcher struct {
	policy Policy
	bs     []*station
	rng    *rand.Rand
	rr     int
	ovs    bool
	cum    []float64 // cumulative weights (or slot counts) for weighted random
	speeds []float64 // oracle: current true speeds, refreshed per choice
	ties   []int
}

func newDispatcher(cfg *Config, bs []*station, rng *rand.Rand) dispatcher {
	d := dispatcher{policy: cfg.Policy, bs: bs, rng: rng, ovs: cfg.OVSSlots, cum: make([]float64, len(bs))}
	switch cfg.Policy {
	case Static:
		w := make([]float64, len(bs))
		for i, b := range cfg.Backends {
			w[i] = b.Declared
		}
		if d.ovs { // static weights go through the same slot table; the oracle stays exact
			d.setWeights(toUint16(w))
		} else {
			d.setFloat(w)
		}
	case Fixed:
		if d.ovs {
			d.setWeights(toUint16(cfg.Fixed))
		} else {
			d.setFloat(cfg.Fixed)
		}
	case Oracle:
		d.speeds = make([]float64, len(bs))
	}
	return d
}

// setWeights installs integer weights from the pipeline. With OVSSlots they are first
// turned into slot counts, as the switch does on every group change.
func (d *dispatcher) setWeights(w []uint16) {
	f := make([]float64, len(w))
	if d.ovs {
		for i, s := range ovsSlots(w) {
			f[i] = float64(s)
		}
	} else {
		for i, x := range w {
			f[i] = float64(x)
		}
	}
	d.setFloat(f)
}

func (d *dispatcher) setFloat(w []float64) {
	sum := 0.0
	for i, x := range w {
		sum += x
		d.cum[i] = sum
	}
}

// toUint16 scales positive weights to integers summing to about 1000, as an operator's static
// weights would be written to a group.
func toUint16(w []float64) []uint16 {
	sum := 0.0
	for _, x := range w {
		sum += x
	}
	out := make([]uint16, len(w))
	for i, x := range w {
		out[i] = uint16(max(1, x/sum*1000+0.5))
	}
	return out
}

func (d *dispatcher) choose(t float64) int {
	switch d.policy {
	case RoundRobin:
		i := d.rr
		d.rr = (d.rr + 1) % len(d.bs)
		return i
	case LeastConn:
		best := -1
		d.ties = d.ties[:0]
		for i, b := range d.bs {
			q := b.inSystem(t)
			switch {
			case best < 0 || q < best:
				best = q
				d.ties = append(d.ties[:0], i)
			case q == best:
				d.ties = append(d.ties, i)
			}
		}
		if len(d.ties) == 1 {
			return d.ties[0]
		}
		return d.ties[d.rng.IntN(len(d.ties))]
	case Oracle:
		for i, b := range d.bs {
			d.speeds[i] = b.speedAt(t)
		}
		sum := 0.0
		for i, x := range d.speeds {
			sum += x
			d.cum[i] = sum
		}
	}
	r := d.rng.Float64() * d.cum[len(d.cum)-1]
	for i, c := range d.cum {
		if r < c {
			return i
		}
	}
	return len(d.cum) - 1
}
