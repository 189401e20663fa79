// Package ofswitch owns the OpenFlow 1.3 sessions with switches: the listener, HELLO and
// FEATURES, echo keepalives, transaction ids, applying planned messages confirmed by a
// Barrier reply, reading back group and flow state, and delivering packet-ins.
//
// It must not decide what to install (that is controller/dataplane) nor parse probe reports.
package ofswitch
