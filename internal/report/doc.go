// Package report is the push protocol shared by the probe and the collector:
// the wire codec (AppendSeal, Open, and Frame for the checks that need no
// key), the key file loader (LoadKey), per-backend key derivation
// (DeriveKey) and the replay guard (Guard, with Marks and Restore to keep its
// state across a restart).
//
// One file per job: model.go is what a report says and the rules it must meet (Validate);
// frame.go is the datagram's layout and the one framing rule both directions use, so the
// encoder cannot write what the decoder refuses; encode.go seals (AppendSeal); decode.go
// opens (Open, Opener, Frame's checks plus the key, the tag and the fields).
//
// It is a pure codec in the sense of gobgp's packet package: it opens no
// socket, reads no clock (callers pass "now" in) and never logs. Every
// rejection is a *Error carrying a Reason, so the server can count and
// rate-limit them without parsing strings.
//
// The byte layout is specified in docs/push-protocol.md; a golden datagram
// under testdata keeps that document, the encoder and the decoder in step.
//
// This package must not import anything from flowweight: the probe links it,
// and the probe knows nothing of the collector or of OpenFlow.
package report
