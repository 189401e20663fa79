package weights

import (
	"errors"
	"fmt"
)

// PolicyName selects how a service's weights are derived. Operators compare policies and
// fall back to a simpler one when a dynamic decision looks wrong, without redeploying.
type PolicyName string

const (
	// PolicyDynamic derives weights from 1/AL with learned capacity (the seeds' formula; the
	// headroom policy falls back to it when a backend lacks the service's own CPU).
	PolicyDynamic PolicyName = "dynamic"
	// PolicyStatic uses declared capacity only and ignores load.
	PolicyStatic PolicyName = "static"
	// PolicyEqual gives every live backend the same weight.
	PolicyEqual PolicyName = "equal"
	// PolicyLeastConn approximates weighted least-connections: weight ∝ C/(conns+1).
	PolicyLeastConn PolicyName = "least_conn"
	// PolicyHeadroom (the default) gives each backend the load that leaves every backend the same spare
	// capacity, from the CPU its service uses and the CPU nobody uses (docs/weights.md,
	// "The headroom policy").
	PolicyHeadroom PolicyName = "headroom"
)

// Validate reports whether p names a known policy.
func (p PolicyName) Validate() error {
	switch p {
	case PolicyDynamic, PolicyStatic, PolicyEqual, PolicyLeastConn, PolicyHeadroom:
		return nil
	}
	return errors.New(fmt.Sprintf("%q is not one of headroom, dynamic, static, equal, least_conn", string(p)))
}

// Policy returns the policy p names. Validate rejects any other name; Compute runs one as
// the dynamic policy.
func (p PolicyName) Policy() Policy {
	switch p {
	case PolicyStatic:
		return staticPolicy{}
	case PolicyEqual:
		return equalPolicy{}
	case PolicyLeastConn:
		return leastConnPolicy{}
	case PolicyHeadroom:
		return headroomPolicy{}
	}
	return dynamicPolicy{}
}

// Policy is one way of deriving a service's target shares, chosen once per update from the
// configured name (PolicyName.Policy). Compute runs the pipeline that every policy shares —
// eligibility, capacity and load, learning, the slow cut, damping, the step limit, the
// floor, warm-up, rounding and the explanation — and asks the policy only for its raw
// shares and the traits below. The set is closed (the hooks are unexported): one type per
// policy, each in its own file (static.go, equal.go, leastconn.go, dynamic.go, headroom.go).
type Policy interface {
	// Name is the name operators configure the policy by.
	Name() PolicyName
	// Adaptive reports whether the policy learns capacity from measured throughput and damps
	// its targets toward the previous shares (Tuning.Gain): its targets are measurements,
	// noisy from one update to the next. The other policies' targets are applied as they
	// are, within the step limit.
	Adaptive() bool
	// Fixed reports whether the policy is a split by choice that ignores load: any change to
	// it is worth a rewrite (Worth has no dead-band for it, or the step limit's last small
	// step toward its exact target would never be applied), and the fast loop does not
	// follow work in flight.
	Fixed() bool

	// prepare runs once loads are known, before learning, and returns the policy that runs
	// this update in its place (setting out.Fallback), or nil for itself.
	prepare(in []Backend, w []work, t Tuning, out *Result) Policy
	// util is the utilisation learning divides a backend's throughput by.
	util(x *work) float64
	// shares sets each live backend's target and returns the targets' sum. It also divides
	// each live backend's C by meanC (each does both), which leaves C at a pool mean of 1.
	shares(in []Backend, w []work, t Tuning, meanC float64) float64
	// explain adds the policy's own terms to a live backend's explanation. It is asked of the
	// configured policy, also when another ran in its place (out.Fallback).
	explain(e *Explanation, x *work, out *Result)
	// worth reports whether a move of a backend's weight from prev (> 0) to e.Weight is worth
	// a rewrite although it is inside the dead-band.
	worth(e Explanation, prev uint16, next *Result) bool
}

// plain holds the hooks of a policy that has none of its own: it runs as configured, learns
// from the composite load, explains nothing more, and the dead-band decides rewrites.
type plain struct{}

func (plain) prepare([]Backend, []work, Tuning, *Result) Policy { return nil }
func (plain) util(x *work) float64                              { return x.ls }
func (plain) explain(*Explanation, *work, *Result)              {}
func (plain) worth(Explanation, uint16, *Result) bool           { return false }

// each divides every live backend's C by meanC, sets its target to share(i, x) and returns
// the targets' sum: the shares of a policy that decides per backend.
func each(w []work, meanC float64, share func(i int, x *work) float64) float64 {
	var sum float64
	for i := range w {
		x := &w[i]
		if !x.live {
			continue
		}
		x.c /= meanC
		x.target = share(i, x)
		sum += x.target
	}
	return sum
}
