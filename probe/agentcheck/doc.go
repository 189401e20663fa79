// Package agentcheck answers HAProxy's agent check (`agent-check agent-port N` on a server
// line) with the state the probe measured: up or down from the latest health check, ready or
// drain from the operator's drain request, and a weight percentage from the load.
//
// It exists so that a backend can be balanced by HAProxy as well as by the flowweight
// controller, from the same probe and the same measurements. HAProxy multiplies the server's
// configured weight by the percentage, so the configured weight carries capacity and the
// agent carries load.
//
// The reply text is a pure function of Status (Reply) and the percentage a pure function of
// the report (Weigher.Percent). Server answers each connection with the latest reply held in
// an atomic value and never waits on the sampling loop; Tap feeds it from the reports the
// probe sends. This package must not import the agent loop, the collector's state machine or
// anything OpenFlow.
package agentcheck
