package view

import "github.com/prometheus/client_golang/prometheus"

// shadowView fills the service's shadow policy and each backend's shadow weight and share
// from the snapshot; nothing without a shadow, only the policy before its first computation.
func shadowView(v *ServiceView, s *Service) {
	if s.Shadow == "" {
		return
	}
	v.ShadowPolicy = s.Shadow
	total := 0
	for _, w := range s.ShadowWeights {
		total += int(w)
	}
	for j := range v.Backends {
		if j >= len(s.ShadowWeights) {
			break
		}
		w, share := s.ShadowWeights[j], 0.0
		if total > 0 {
			share = float64(w) / float64(total)
		}
		v.Backends[j].ShadowWeight, v.Backends[j].ShadowShare = &w, &share
	}
}

var shadowDesc = prometheus.NewDesc("flowweight_backend_weight_shadow",
	"Bucket weight the service's shadow_policy would give the backend (computed at every update from the live inputs, never applied); exists only while the service has a shadow policy.",
	[]string{"service", "backend"}, nil)

// shadowCollector reports the shadow weights at scrape time from the latest snapshot: a
// series exists exactly while its service has a shadow policy, so a reload that drops one
// leaves nothing behind to forget.
type shadowCollector struct{ b *Board }

func (c shadowCollector) Describe(ch chan<- *prometheus.Desc) { ch <- shadowDesc }

func (c shadowCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.b.Latest().Services {
		if s.Shadow == "" {
			continue
		}
		for j, be := range s.Base.Backends {
			if j < len(s.ShadowWeights) {
				ch <- prometheus.MustNewConstMetric(shadowDesc, prometheus.GaugeValue, float64(s.ShadowWeights[j]), s.Base.Name, be.Name)
			}
		}
	}
}
