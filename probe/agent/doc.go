// Package agent is the probe's loop: every interval (with jitter) it runs the samplers and the
// health check, builds a report, seals it with the backend's key and sends one datagram. After
// a failed check it checks and reports every FastInterval, with the last sample's load, until
// FastRise checks in a row have passed (Agent.FastInterval).
//
// The clock and the sender are small interfaces so that the loop is tested without sleeping
// and without a network; the wire format is internal/report's. The loop never stops because
// a sampler or the network failed: failures are logged at a bounded rate, counted in Stats,
// and the next interval tries again. Only cancellation of its context ends it, after one last
// report flagged leaving. This package must not import the collector's state machine or
// anything OpenFlow.
package agent
