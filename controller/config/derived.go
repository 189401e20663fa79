package config

import "time"

// Defaults of [collector] keys that are checked against poll_interval. A default must be
// valid with every allowed poll_interval: a fixed 250 ms health_fast_interval made any
// poll_interval under 250 ms refuse to load unless health_fast_interval was set too.
const (
	// DefaultHealthTimeout is collector.health_timeout's default when poll_interval is at
	// least as long: the check runs after the poll, so a longer one delays the next poll.
	DefaultHealthTimeout = 2 * time.Second
	// DefaultHealthFastInterval is collector.health_fast_interval's default when
	// poll_interval is at least as long.
	DefaultHealthFastInterval = 250 * time.Millisecond
)

// fillCollectorTiming sets health_timeout and health_fast_interval, when the file left them
// out (parse decodes over 0 for both), to their defaults capped at poll_interval.
func (c *Collector) fillCollectorTiming() {
	capped := func(d time.Duration) time.Duration {
		if c.PollInterval > 0 && c.PollInterval < d {
			return c.PollInterval
		}
		return d
	}
	if c.HealthTimeout == 0 {
		c.HealthTimeout = capped(DefaultHealthTimeout)
	}
	if c.HealthFastInterval == 0 {
		c.HealthFastInterval = capped(DefaultHealthFastInterval)
	}
}
