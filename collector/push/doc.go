// Package push is the collector's UDP server for the push protocol
// (docs/push-protocol.md): it reads datagrams, has internal/report frame,
// verify, decode and replay-check them, and hands accepted reports to a Sink.
//
// It owns the sockets and the read loops, as gobgp's FSM owns the socket and
// leaves bytes to the codec, and with them what protects the loops from
// floods: the per-source failure budget (a fixed table of token buckets),
// the socket filter's drop list of flooding sources (Linux), and each
// backend's own addresses (configured, SetBackendAddrs, or of its last
// accepted report), which neither sheds nor lists, with a failure budget of
// their own (trust.go). Per-backend replay state is report.Guard's. It computes nothing from the values, and
// must not import the controller or weights packages.
//
// One read loop is bound by a core: a system call per datagram cost more
// than verifying it, so on Linux each loop takes up to 64 datagrams per
// call (recvmmsg), and Config.Readers loops (one per core by default) read
// sockets of their own on the one port (SO_REUSEPORT), which the kernel
// fills by source address and port. What the loops share (the failure
// budget, the drop list, the last good addresses, the replay guard) is
// locked; one backend's replay check and sink call are serialised, so the
// sink sees its reports in the order the guard accepted them.
package push
