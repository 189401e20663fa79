// Package push is the collector's UDP server for the push protocol
// (docs/push-protocol.md): it reads datagrams, has collector/report frame,
// verify, decode and replay-check them, and hands accepted reports to a Sink.
//
// It owns the socket and the read loop, as gobgp's FSM owns the socket and
// leaves bytes to the codec, and with them what protects the loop from
// floods: the per-source failure budget (a fixed table of token buckets),
// the socket filter's drop list of flooding sources (Linux), and, per
// configured backend, the address of its last accepted report. Per-backend
// replay state is report.Guard's. It computes nothing from the values, and
// must not import the controller or weights packages.
package push
