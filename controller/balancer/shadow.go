package balancer

import (
	"flowweight/controller/config"
	"flowweight/weights"
)

// shadow is a service's second policy (shadow_policy): computed at every update from the
// same inputs as the live weights, shown beside them (API, status, metrics), and written only
// to the service's canary switches (canary_datapaths), never to the others. It has its own state — learned capacity, the shares its damping and step limit
// start from, the weights it would have the switch hold — so the live computation's state is
// never touched by it, and what it shows is what the shadow policy would do had it been live
// all along. An undamped shadow would be simpler, but for the adaptive policies (headroom,
// dynamic) it would show raw targets that jump every update, which the live policy never
// applies: the comparison would flatter the live side.
type shadow struct {
	tuning weights.Tuning
	// books are its own learned capacity and previous shares, one per backend in config
	// order (their throughput fields are unused: it reads the live side's measurement).
	books  []book
	in     []weights.Backend
	result weights.Result
	// held is what the switch would hold if the shadow were live: its result whenever that
	// was worth a rewrite (weights.Worth), like the live applied weights; nil before the first.
	held []uint16
}

// newShadow returns the service's shadow, nil without shadow_policy. It keeps old's state
// for the backends that remain when old ran the same shadow policy (a reload that changes
// something else does not restart its learning); a changed policy starts afresh.
func newShadow(s *config.Service, live weights.Tuning, old *service) *shadow {
	if s.ShadowPolicy == "" {
		return nil
	}
	sh := &shadow{tuning: live, books: make([]book, len(s.Backends)), in: make([]weights.Backend, len(s.Backends))}
	sh.tuning.Policy = s.ShadowPolicy
	if old == nil || old.shadow == nil || old.shadow.tuning.Policy != s.ShadowPolicy {
		return sh
	}
	if old.shadow.held != nil {
		sh.held = make([]uint16, len(s.Backends))
	}
	for j, k := range remaining(old.cfg.Backends, s.Backends) {
		sh.books[j] = old.shadow.books[k]
		if sh.held != nil {
			sh.held[j] = old.shadow.held[k]
		}
	}
	return sh
}

// compute runs the shadow policy on live, the inputs the live computation just used, with the
// shadow's own learned capacity, previous shares and weights in their place. live is only
// read. Its state moves by the live side's rules (service.compute): learning at a period,
// the previous share at a period or a (virtual) rewrite; a hold does not stop it, since it
// writes nothing. It reports whether the weights it would have the switch hold moved (what
// its canary switches then rewrite).
func (sh *shadow) compute(live []weights.Backend, periodic bool) bool {
	for j, in := range live {
		// The CPU the backend reports answers to the live weights (outside a canary), which the
		// watched warm-up judges its cost by.
		in.ServedWeight = in.PrevWeight
		in.Learned, in.PrevShare, in.PrevWeight = sh.books[j].learned, sh.books[j].prevShare, 0
		in.PrevWarmup, in.PrevWarmupElapsed = sh.books[j].warm, sh.books[j].warmAt
		if sh.held != nil {
			in.PrevWeight = sh.held[j]
		}
		sh.in[j] = in
	}
	weights.Compute(sh.in, sh.tuning, &sh.result)
	apply := sh.held == nil || weights.Worth(sh.held, &sh.result, sh.tuning)
	advance(sh.books, sh.in, &sh.result, periodic, apply)
	if apply {
		sh.held = sh.result.Weights(sh.held[:0])
	}
	return apply
}
