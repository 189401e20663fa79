package ofswitch

import "log/slog"

// Fault is why a message or a connection from a peer was refused, dropped or logged. The set
// is fixed, so a metric labelled by it stays bounded however hostile the peers are.
type Fault uint8

const (
	FaultSwitchError           Fault = iota // an OFPT_ERROR arrived (solicited or not)
	FaultMalformedError                     // an OFPT_ERROR too short to decode
	FaultMalformedPacketIn                  // a PACKET_IN that does not decode
	FaultPacketInTooLarge                   // a PACKET_IN above Config.MaxPacketInBytes, discarded unread
	FaultPacketInQueueFull                  // a PACKET_IN dropped because the Handler fell behind
	FaultUnsolicitedReply                   // a reply whose xid no request waits for (or a duplicate)
	FaultMultipartTypeMismatch              // a MULTIPART_REPLY of another type than requested
	FaultMultipartTooLarge                  // a multipart reply above its byte or part limit
	FaultMalformedReply                     // a reply that does not decode (too short; a ROLE_REPLY not 16 bytes or of no role)
	FaultIgnoredMessage                     // a message type the session does not use, discarded unread
	FaultBadVersion                         // a message not in OpenFlow 1.3 after negotiating it
	FaultWriteQueueFull                     // the peer did not read: its replies piled up
	FaultWriteTimeout                       // the peer did not read: a write missed its deadline
	FaultHandshakeFailed                    // HELLO/FEATURES/TLS failed
	FaultTooManyHandshakes                  // Config.MaxHandshakes connections were already in the handshake
	FaultTooManySwitches                    // Config.MaxSwitches datapaths were already connected
	FaultDuplicateDatapath                  // a second connection claimed a live datapath id
	FaultIdentityMismatch                   // a datapath id claimed with a certificate it is not bound to
	FaultMalformedHeader                    // a header whose length cannot hold it: the stream is lost
	FaultMalformedRoleStatus                // an ONF role status (OFPT_EXPERIMENTER) that does not decode, discarded
	numFaults
)

var faultNames = [numFaults]string{
	"switch_error", "malformed_error", "malformed_packet_in", "packet_in_too_large",
	"packet_in_queue_full", "unsolicited_reply", "multipart_type_mismatch",
	"multipart_too_large", "malformed_reply", "ignored_message", "bad_version",
	"write_queue_full", "write_timeout", "handshake_failed", "too_many_handshakes",
	"too_many_switches", "duplicate_datapath", "identity_mismatch", "malformed_header",
	"malformed_role_status",
}

// String is the fault's metric label value.
func (f Fault) String() string {
	if f < numFaults {
		return faultNames[f]
	}
	return "unknown"
}

// Faults lists every Fault, for exporting zero counters too.
func Faults() []Fault {
	out := make([]Fault, numFaults)
	for i := range out {
		out[i] = Fault(i)
	}
	return out
}

// faultLevel is how loud a fault's (rate-limited) log line is: the session's own routine
// traffic (async messages it does not use) is Debug, everything else Warn.
func (f Fault) level() slog.Level {
	if f == FaultIgnoredMessage {
		return slog.LevelDebug
	}
	return slog.LevelWarn
}
