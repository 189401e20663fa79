package config

import "flowweight/configs"

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
