package agentcheck

import (
	"sync/atomic"

	"flowweight/internal/report"
)

// Sender sends one datagram; it is the probe's report sender (probe/agent.Sender).
type Sender interface {
	Send(datagram []byte) error
}

// Tap is a Sender that passes every datagram on to Next and, on the way, sets Server's
// answer from the report it carries. Sitting on the send path means every report the probe
// builds (each interval, and at once after a drain signal) updates the answer, with the same held values and flags the collector gets, without the
// agent loop knowing about HAProxy. The answer is updated before sending, so an unreachable
// collector does not stop HAProxy's view from following the backend.
type Tap struct {
	Next    Sender
	Key     []byte // the probe's HMAC key, to open its own datagrams
	Weigher Weigher
	Server  *Server

	// OpenErrors counts datagrams the tap could not read; they are still passed on. Not
	// expected to happen: the probe seals what it sends with Key.
	OpenErrors atomic.Uint64
}

// Send implements Sender.
func (t *Tap) Send(datagram []byte) error {
	var r report.Report
	switch err := report.Open(datagram, func(string) ([]byte, bool) { return t.Key, true }, &r); {
	case err != nil:
		t.OpenErrors.Add(1)
	case r.Signals&report.SignalInFlight != 0:
		// An in-flight report repeats the last full one with a fresh connection count, for
		// the controller's fast loop; HAProxy's agent weight follows the full samples, or it
		// would flip with every count between two of them.
	default:
		t.Server.Set(t.Weigher.Status(&r))
	}
	return t.Next.Send(datagram) // unwrapped: the agent logs it as the sender's own error
}
