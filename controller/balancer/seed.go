package balancer

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"flowweight/controller/switchsync"
)

// The start-up seed: the weights a restarted controller starts from, so that its first
// writes are damped and step-limited from what the switches serve (service.adoptSeed). It
// comes from, in order:
//
//  1. the state file (in HA, the leader's document in etcd): the weights this controller, or
//     the pool's leader, last wrote. Its own word.
//  2. the switches, only when they agree: a majority of the connected switches that carry the
//     service, at least two, hold the same weights for its group; or, when every switch is
//     authenticated by a certificate naming its datapath id (tls_names_dpid), all of them.
//     One unauthenticated connection must not choose the weights every switch is then
//     rewritten toward.
//  3. none: the weights are computed from the reports, as at a first start.
//
// Where it came from is logged once per service when the hold ends.

// Seed sources, as logged.
const (
	seedFromState    = "state file"
	seedFromEtcd     = "state in etcd"
	seedFromSwitches = "switches"
)

// savedSeed is the service's weights from the state file in config order, if the file holds
// one for every configured backend and they are not all zero.
func savedSeed(saved map[string]map[string]uint16, s *service) ([]uint16, bool) {
	ws, ok := saved[s.cfg.Name]
	if !ok {
		return nil, false
	}
	out := make([]uint16, len(s.cfg.Backends))
	sum := 0
	for j, be := range s.cfg.Backends {
		w, ok := ws[be.Name]
		if !ok {
			return nil, false // the configuration changed since: its backends are not all there
		}
		out[j] = w
		sum += int(w)
	}
	return out, sum > 0
}

// agreedSeed picks the weights the switches agree on. held has one entry per connected switch
// that carries the service: the weights it holds for the group (nil: none, or not read back
// yet). It returns the weights and how many switches hold them, or ok false and why not.
func agreedSeed(held [][]uint16, authenticated bool) (w []uint16, agree int, why string, ok bool) {
	n := len(held)
	for i, a := range held {
		if a == nil {
			continue
		}
		c := 0
		for _, b := range held {
			if slices.Equal(a, b) {
				c++
			}
		}
		if c > agree || (c == agree && w != nil && slices.Compare(a, w) < 0) { // ties: a fixed choice
			w, agree = held[i], c
		}
	}
	switch {
	case w == nil:
		return nil, 0, fmt.Sprintf("none of the %d switches holds weights for the group", n), false
	case agree >= 2 && 2*agree > n, authenticated && agree == n:
		return w, agree, "", true
	case authenticated:
		return nil, 0, fmt.Sprintf("%d of %d switches hold the same weights: a seed needs all of them, or a majority and at least 2", agree, n), false
	default:
		return nil, 0, fmt.Sprintf("%d of %d switches hold the same weights: a seed needs a majority and at least 2 (switches are not authenticated by tls_names_dpid)", agree, n), false
	}
}

// takeSeeds records, for each service in its start-up hold that has written nothing yet, the
// weights to start from when the hold ends (service.adoptSeed): the saved document's (saved,
// from the keeper), else the switches' if they agree. A standby takes the switches' at every
// update, when they agree: it follows what the leader writes. authenticated: every switch
// is authenticated by a certificate naming its datapath id. Called by the update with the
// balancer's lock held (the services are its).
func takeSeeds(services []*service, syncers []*switchsync.Syncer, standby, authenticated bool, saved *keeper) {
	for _, s := range services {
		starting := s.hold && s.applied == nil && s.seed == nil
		if !standby && !starting {
			continue
		}
		if starting {
			if w, ok := savedSeed(saved.weights, s); ok {
				s.seed, s.seedFrom = w, saved.weightsFrom
				continue
			}
		}
		var held [][]uint16
		for _, sy := range syncers {
			st := sy.Status()
			if dps := s.cfg.ParsedDatapaths(); dps != nil && !slices.Contains(dps, st.DPID) {
				continue
			}
			w := st.Seeds[s.cfg.Name]
			if len(w) != len(s.cfg.Backends) {
				w = nil
			}
			held = append(held, w)
		}
		w, agree, why, ok := agreedSeed(held, authenticated)
		if !ok {
			s.seedWhy = why
			continue
		}
		s.seed = slices.Clone(w)
		s.seedFrom = fmt.Sprintf("%s (%d of %d agree)", seedFromSwitches, agree, len(held))
	}
}

// noteSeed logs, once per service at the end of its start-up hold, where its first weights
// come from; savedFrom names the store a document was loaded from ("": none).
func noteSeed(log *slog.Logger, s *service, savedFrom string) {
	if s.seedNoted {
		return
	}
	s.seedNoted = true
	if s.seed != nil {
		log.Info("start-up weights taken over", "service", s.cfg.Name, "source", s.seedFrom, "weights", fmt.Sprint(s.seed))
		return
	}
	why := s.seedWhy
	if why == "" {
		why = "no switch holds its group"
	}
	var src []string
	if savedFrom != "" {
		src = append(src, "the "+savedFrom+" has no weights for all its backends")
	} else {
		src = append(src, "no saved weights")
	}
	src = append(src, why)
	log.Info("start-up weights computed from the reports", "service", s.cfg.Name, "why", strings.Join(src, "; "))
}
