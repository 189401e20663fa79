package state

import (
	"fmt"
	"maps"
	"slices"
)

// DropLearnedOutside removes every learned capacity outside [1/maxFactor, maxFactor], the
// range learning itself keeps to (weighting.learn.max_factor), and returns one error per
// value removed, naming the backend, the service, the value and the range. The state file and
// the etcd state document both pass through it after Decode, so neither can hand the weights
// a factor that learning could never reach: a document saying 1000 split two identical
// backends 990/10 while learning stops at 8. It drops rather than refuses the whole: a bound
// lowered since the value was written is the operator's change, and the rest (drains, other
// backends, replay marks) is still good. maxFactor <= 0 checks nothing.
func (f *File) DropLearnedOutside(maxFactor float64) []error {
	if f == nil || !(maxFactor > 0) {
		return nil
	}
	lo, hi := 1/maxFactor, maxFactor
	within := func(l float64) bool { return l >= lo*(1-1e-9) && l <= hi*(1+1e-9) }
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(f.Backends)) {
		b := f.Backends[name]
		changed := false
		if l := b.LearnedCapacity; l != 0 && !within(l) {
			errs = append(errs, fmt.Errorf("backends %q: learned capacity %v in service %q outside [%.4g,%.4g] (weighting.learn.max_factor): not applied", name, l, b.Service, lo, hi))
			b.LearnedCapacity, changed = 0, true
		}
		for _, svc := range slices.Sorted(maps.Keys(b.Also)) {
			if l := b.Also[svc]; !within(l) {
				errs = append(errs, fmt.Errorf("backends %q: learned capacity %v in service %q outside [%.4g,%.4g] (weighting.learn.max_factor): not applied", name, l, svc, lo, hi))
				if !changed {
					b.Also = maps.Clone(b.Also)
				}
				delete(b.Also, svc)
				changed = true
			}
		}
		if changed {
			if len(b.Also) == 0 {
				b.Also = nil
			}
			f.Backends[name] = b
		}
	}
	return errs
}
