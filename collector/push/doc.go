// Package push is the collector's UDP server for the push protocol
// (docs/push-protocol.md): it reads datagrams, has collector/report verify,
// decode and replay-check them, and hands accepted reports to a Sink.
//
// It owns the socket and the read loop only, as gobgp's FSM owns the
// socket and leaves bytes to the codec. It keeps no per-backend state of
// its own beyond report.Guard, computes nothing from the values, and must
// not import the controller or weights packages.
package push
