//go:build integration

package ofswitch

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// ovsConnect is how long Open vSwitch may take to reach a new controller.
const ovsConnect = 30 * time.Second

// selectGroup is a select GROUP_MOD with one plain output bucket per weight.
func selectGroup(cmd ofp.GroupCommand, id uint32, weights []uint16) Message {
	g := &ofp.GroupMod{Command: cmd, Type: ofp.GroupTypeSelect, Group: ofp.Group(id)}
	for i, w := range weights {
		g.Buckets = append(g.Buckets, ofp.Bucket{Weight: w, WatchPort: ofp.PortAny, WatchGroup: ofp.GroupAny,
			Actions: ofp.Actions{&ofp.ActionOutput{Port: ofp.PortNo(i + 1)}}})
	}
	return Message{Type: of.TypeGroupMod, Body: g, Desc: fmt.Sprintf("group %d %s (%d buckets)", id, map[ofp.GroupCommand]string{0: "add", 1: "modify", 2: "delete"}[cmd], len(weights))}
}

func TestOVSSession(t *testing.T) {
	h := newRecHandler()
	srv, port := serverOnFreePort(t, h, Config{})
	start := time.Now()
	lab := startOVSLab(t, port)
	sw := h.waitFor(t, "connected", ovsConnect).sw
	t.Logf("switch connected %v after the lab started", time.Since(start))

	// The datapath id from FEATURES_REPLY is the bridge's.
	want, err := strconv.ParseUint(strings.Trim(strings.TrimSpace(lab.vsctl("get", "bridge", lab.bridge, "datapath_id")), `"`), 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	if sw.DatapathID() != want {
		t.Fatalf("DatapathID %016x, ovs-vsctl says %016x", sw.DatapathID(), want)
	}

	ctx := context.Background()
	res, err := sw.Apply(ctx, []Message{selectGroup(ofp.GroupAdd, 1, []uint16{10, 20, 30})})
	if err != nil {
		t.Fatalf("Apply ADD: %v", err)
	}
	t.Logf("barrier RTT for a 3-bucket ADD: %v", res.BarrierRTT[0])
	groups := lab.ofctl("dump-groups")
	for _, w := range []string{"group_id=1,type=select", "weight:10,actions=output:1", "weight:20,actions=output:2", "weight:30,actions=output:3"} {
		if !strings.Contains(groups, w) {
			t.Errorf("dump-groups lacks %q:\n%s", w, groups)
		}
	}

	missing := selectGroup(ofp.GroupModify, 99, []uint16{1})
	_, err = sw.Apply(ctx, []Message{missing})
	var op *OpError
	if !errors.As(err, &op) {
		t.Fatalf("MODIFY of a missing group: %v, want *OpError", err)
	}
	if op.TypeName != "OFPET_GROUP_MOD_FAILED" || op.CodeName != "OFPGMFC_UNKNOWN_GROUP" || op.Msg.Desc != missing.Desc {
		t.Errorf("OpError %s/%s for %q, want OFPET_GROUP_MOD_FAILED/OFPGMFC_UNKNOWN_GROUP for %q", op.TypeName, op.CodeName, op.Msg.Desc, missing.Desc)
	}
	if !strings.Contains(err.Error(), missing.Desc) || !strings.Contains(err.Error(), "UNKNOWN_GROUP") {
		t.Errorf("error text %q names neither the message nor the code", err)
	}

	desc, err := sw.Multipart(ctx, ofp.MultipartTypeGroupDescription, nil)
	if err != nil {
		t.Fatalf("GROUP_DESC: %v", err)
	}
	// ofp_group_desc: length, type, pad, group_id, then buckets.
	if len(desc) < 8 || ofp.GroupType(desc[2]) != ofp.GroupTypeSelect || binary.BigEndian.Uint32(desc[4:8]) != 1 {
		t.Fatalf("GROUP_DESC = %x, want the select group 1 first", desc)
	}

	// A restarted switch process comes back as a new session of the same datapath.
	lab.killVswitchd()
	ev := h.waitFor(t, "disconnected", ovsConnect)
	if ev.sw != sw || ev.err == nil {
		t.Fatalf("disconnected %v with %v", ev.sw, ev.err)
	}
	t.Logf("disconnect cause: %v", ev.err)
	start = time.Now()
	lab.startVswitchd()
	sw2 := h.waitFor(t, "connected", ovsConnect).sw
	t.Logf("switch reconnected %v after ovs-vswitchd restarted", time.Since(start))
	if sw2 == sw || sw2.DatapathID() != want {
		t.Fatalf("reconnected session %v (dpid %016x), want a new one of %016x", sw2, sw2.DatapathID(), want)
	}
	if got, _ := srv.Switch(want); got != sw2 {
		t.Error("server does not map the datapath to the new session")
	}
	if _, err := sw2.Apply(ctx, []Message{selectGroup(ofp.GroupAdd, 1, []uint16{1, 2})}); err != nil {
		t.Errorf("Apply after reconnect: %v", err)
	}
}
