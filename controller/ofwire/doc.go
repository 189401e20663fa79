// Package nx encodes and decodes the Open vSwitch (Nicira) OpenFlow extensions that the
// conntrack data plane needs and github.com/netrack/openflow cannot express: the NXAST_CT
// and NXAST_NAT experimenter actions and the NXM_NX_CT_STATE / NXM_NX_CT_ZONE match fields,
// and for client affinity NXAST_LEARN, NXAST_RESUBMIT_TABLE and the NXM_NX_REGn fields
// (learn.go; the bytes checked against what ovs-ofctl itself sends, learn_test.go).
//
// The library passes an experimenter action as a bare 8-byte header and cannot read one back,
// so the actions here implement ofp.Action themselves (they can sit in an ofp.Actions list),
// and ParseActions reads a whole action list, Nicira or standard, from raw bytes so that
// read-back from a switch can be compared with what we planned.
//
// Layouts follow Open vSwitch's nicira-ext.h / ofp-actions.c as measured in docs/design.md: an
// NXAST_CT bucket produced by `ovs-ofctl add-group … ct(commit,zone=7,nat(dst=10.0.0.1:9000),table=2)`
// is byte-identical to CT{Flags: CTCommit, Zone: 7, Table: 2, Actions: {NAT{Flags: NATDst, …}}}.
//
// This package is a pure codec: it opens no sockets, reads no clock, does not log and imports
// nothing of flowweight (internal/layers checks).
package nx
