// Package ofwire is flowweight's OpenFlow codec: the bytes of the OpenFlow 1.3 messages,
// actions, matches and Nicira (Open vSwitch) extensions that github.com/netrack/openflow
// v0.1.0 does not provide, or provides only through reflection too slow for a reweight. No
// maintained OpenFlow library beyond netrack is available to the build, so what flowweight
// encodes and decodes by hand lives here, in one place, and nowhere else.
//
// By job:
//
//   - message.go: the ofp_header (PutHeader, the one header encoder; ParseHeader, ReadFrame),
//     whole messages (AppendMessage, EncodeMessage), and the bodies a session sends or reads
//     itself: HELLO and version negotiation, ERROR (errname.go names its types and codes),
//     FEATURES, MULTIPART framing, SET_CONFIG; packetin.go, role.go (ROLE_REPLY and the ONF
//     role status Open vSwitch sends to 1.3 controllers) and desc.go (OFPMP_DESC).
//   - flows.go, groups.go, instructions.go, match.go: flow and group entries in wire form
//     (Flow, Group, Bucket), FLOW_MOD and GROUP_MOD, the OFPMP_FLOW request, and the
//     OFPMP_FLOW and OFPMP_GROUP_DESC replies read back from a switch; the ofp_match framing
//     and the canonical (sorted) form of a match; groupstats.go the OFPMP_GROUP counters
//     (request for one group or OFPG_ALL, reply with the bucket counters) the measured shares
//     are read from.
//   - encode.go: byte-for-byte netrack's encodings of the standard actions, instructions and
//     OXM fields, appended to one buffer (TestEncodersMatchTheLibrary and FuzzEncodeXM hold the
//     two equal).
//   - nx_*.go: the Nicira extensions the conntrack data plane needs: the NXAST_CT and
//     NXAST_NAT actions, NXM_NX_CT_STATE / NXM_NX_CT_ZONE, and for client affinity
//     NXAST_LEARN, NXAST_RESUBMIT_TABLE and NXM_NX_REGn. netrack passes an experimenter action
//     as a bare 8-byte header and cannot read one back, so these implement ofp.Action
//     themselves, and ParseActions reads a whole action list, Nicira or standard.
//
// The encoders here for messages a switch sends (EncodeGroupDesc, EncodeGroupStats, EncodeFlowStats,
// PacketInBody, RoleBody, RoleStatusBody, DescBody) exist for fake switches and fuzz seeds,
// so that every decoder is tested against an independent producer.
//
// Acceptance: golden bytes taken from Open vSwitch's own encoder. testdata/*.hex are
// ovs-ofctl's action encodings (nx_golden_test.go; the integration tests
// ofctl_integration_test.go and ofprint_integration_test.go compare with a live ovs-ofctl and
// let `ovs-ofctl ofp-print` decode what we encode; groupstats_integration_test.go plays the
// switch to `ovs-ofctl dump-group-stats` and compares the OFPMP_GROUP request it sends with
// testdata/group_stats_request_*.hex), and a PACKET_IN recorded from Open vSwitch
// 3.1 (packetin_golden_test.go). An NXAST_CT bucket produced by
// `ovs-ofctl add-group … ct(commit,zone=7,nat(dst=10.0.0.1:9000),table=2)` is byte-identical
// to CT{Flags: CTCommit, Zone: 7, Table: 2, Actions: {NAT{Flags: NATDst, …}}}
// (docs/design.md). Every decoder has a fuzz target.
//
// It decides nothing: what to install is controller/dataplane's, sessions are
// controller/ofswitch's. It is a leaf: it opens no sockets, reads no clock, does not log and
// imports nothing of flowweight (internal/layers checks).
package ofwire
