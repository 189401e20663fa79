package config

import (
	"fmt"
	"slices"

	"flowweight/configs"
)

// validateShadow checks a service's shadow_policy: any name policy accepts, but not the
// policy the service runs (its own or weighting.policy). A shadow of the live policy would
// show the live weights again and look like agreement where nothing was compared, so the
// file says what it means instead.
func (c *Config) validateShadow(p *configs.Problems, key string, s *Service) {
	if s.ShadowPolicy == "" {
		return
	}
	if err := s.ShadowPolicy.Validate(); err != nil {
		p.Add(key+".shadow_policy", err)
		return
	}
	if live := c.EffectivePolicy(s); s.ShadowPolicy == live {
		p.Addf(key+".shadow_policy", "%q is the service's live policy already: a shadow shows a different policy beside it (remove shadow_policy, or name another)", string(live))
	}
}

// validateCanary checks canary_datapaths and keeps the parsed ids: the candidate it applies
// is the shadow policy, so it needs one; reactive dispatch chooses each connection fleet-wide
// from the live weights, so it has no per-switch weights to differ; and a canary switch the
// service is not placed on would hold nothing of it.
func (c *Config) validateCanary(p *configs.Problems, key string, s *Service) {
	s.canary = nil
	if len(s.CanaryDatapaths) == 0 {
		return
	}
	switch {
	case s.ShadowPolicy == "":
		p.Addf(key+".canary_datapaths", "needs shadow_policy: the canary switches hold the shadow policy's weights")
		return
	case s.Dispatch == "reactive":
		p.Addf(key+".canary_datapaths", "dispatch \"reactive\" chooses every connection from the live weights, on every switch alike: it takes no canary")
		return
	}
	seen := map[uint64]int{}
	for j, d := range s.CanaryDatapaths {
		k := fmt.Sprintf("%s.canary_datapaths[%d]", key, j)
		id, err := ParseDatapathID(d)
		if err != nil {
			p.Addf(k, "%v", err)
			continue
		}
		if i, dup := seen[id]; dup {
			p.Addf(k, "%q is canary_datapaths[%d] again", d, i)
			continue
		}
		seen[id] = j
		if s.datapaths != nil && !slices.Contains(s.datapaths, id) {
			p.Addf(k, "%q is not one of the service's datapaths: the service is not placed there", d)
			continue
		}
		s.canary = append(s.canary, id)
	}
}
