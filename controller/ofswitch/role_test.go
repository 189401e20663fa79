package ofswitch

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flowweight/internal/testutil"
	"fmt"
	"strings"
	"testing"
	"time"

	"flowweight/controller/ofwire"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// roleWoken reports whether RoleChanged holds a token, taking it.
func roleWoken(sw *Switch) bool {
	select {
	case <-sw.RoleChanged():
		return true
	default:
		return false
	}
}

// TestRequestRole: the request goes out as OFPT_ROLE_REQUEST (role, pad, generation); the
// reply is decoded, becomes Role, and wakes RoleChanged once per change.
func TestRequestRole(t *testing.T) {
	h := newRecHandler()
	srv, _ := testServer(t, Config{}, h)
	f, sw := connectFake(t, srv, h, 0x301)
	if got := sw.Role(); got != (RoleReply{Role: ofp.ControllerRoleEqual}) {
		t.Fatalf("Role before any request = %v, want EQUAL generation 0", got)
	}
	if roleWoken(sw) {
		t.Fatal("RoleChanged woke before anything changed")
	}

	rr, err := sw.RequestRole(context.Background(), ofp.ControllerRoleMaster, 5)
	if err != nil {
		t.Fatal(err)
	}
	if want := (RoleReply{Role: ofp.ControllerRoleMaster, GenerationID: 5}); rr != want || sw.Role() != want {
		t.Fatalf("RequestRole = %v, Role = %v; want %v", rr, sw.Role(), want)
	}
	req := f.next(of.TypeRoleRequest)
	if want := roleBody(2, 5); !bytes.Equal(req.Body, want) {
		t.Errorf("ROLE_REQUEST body % x, want % x", req.Body, want)
	}
	if !roleWoken(sw) {
		t.Error("RoleChanged did not wake for EQUAL -> MASTER")
	}

	// The same answer again is no change; NOCHANGE asks without changing.
	if rr, err := sw.RequestRole(context.Background(), ofp.ControllerRoleNoChange, 0); err != nil || rr.Role != ofp.ControllerRoleMaster {
		t.Fatalf("NOCHANGE query = %v, %v; want MASTER", rr, err)
	}
	if roleWoken(sw) {
		t.Error("RoleChanged woke although the role stayed MASTER 5")
	}
	if n := srv.Stats().Faults; sumFaults(n) != 0 {
		t.Errorf("faults counted for good role replies: %v", n)
	}
}

func sumFaults(m map[Fault]uint64) uint64 {
	var n uint64
	for _, v := range m {
		n += v
	}
	return n
}

// TestRequestRoleStale: a refused generation comes back as an *OpError naming the switch and
// the request, which IsStale matches; Role keeps what the switch last confirmed.
func TestRequestRoleStale(t *testing.T) {
	h := newRecHandler()
	srv, _ := testServer(t, Config{}, h)
	_, sw := connectFake(t, srv, h, 0x302)
	if _, err := sw.RequestRole(context.Background(), ofp.ControllerRoleMaster, 5); err != nil {
		t.Fatal(err)
	}
	_, err := sw.RequestRole(context.Background(), ofp.ControllerRoleSlave, 4)
	var oe *OpError
	if !errors.As(err, &oe) || !IsStale(err) || IsSlave(err) {
		t.Fatalf("stale request: %v, want an *OpError that IsStale", err)
	}
	for _, want := range []string{"0000000000000302", "role request OFPCR_ROLE_SLAVE generation 4", "OFPET_ROLE_REQUEST_FAILED/OFPRRFC_STALE"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if got := sw.Role(); got != (RoleReply{Role: ofp.ControllerRoleMaster, GenerationID: 5}) {
		t.Errorf("Role after a refused request = %v, want MASTER 5", got)
	}
	// A generation that wrapped past 2^64 is newer, as Open vSwitch compares them.
	if _, err := sw.RequestRole(context.Background(), ofp.ControllerRoleMaster, 5+1<<63-1); err != nil {
		t.Fatalf("newer generation refused: %v", err)
	}
}

// TestRequestRoleMalformed: a reply of the wrong length or with no role fails that request
// with ErrMalformed naming the switch and is counted; the session carries on.
func TestRequestRoleMalformed(t *testing.T) {
	tests := []struct {
		name string
		body []byte
	}{
		{"short", make([]byte, 8)},
		{"long", append(roleBody(2, 5), make([]byte, 8)...)},
		{"empty", nil},
		{"NOCHANGE", roleBody(0, 5)},
		{"undefined role", roleBody(7, 5)},
		{"huge", make([]byte, ofwire.MaxMessageLen-ofwire.HeaderLen)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newRecHandler()
			srv, _ := testServer(t, Config{}, h)
			f := newFake(t, 0x303)
			bad := true
			f.roleHook = func(fr ofwire.Frame) {
				if bad {
					bad = false
					f.send(of.TypeRoleReply, fr.Xid, tt.body)
					return
				}
				f.roleRequest(fr)
			}
			f.connect(srv.Addr())
			sw := h.wait(t, "connected").sw
			_, err := sw.RequestRole(context.Background(), ofp.ControllerRoleMaster, 5)
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "0000000000000303") {
				t.Fatalf("RequestRole error %v, want ErrMalformed naming the switch", err)
			}
			if n := srv.Stats().Faults[FaultMalformedReply]; n != 1 {
				t.Errorf("malformed_reply = %d, want 1", n)
			}
			if sw.Role().Role != ofp.ControllerRoleEqual || roleWoken(sw) {
				t.Errorf("a malformed reply changed Role to %v", sw.Role())
			}
			if rr, err := sw.RequestRole(context.Background(), ofp.ControllerRoleMaster, 6); err != nil || rr.Role != ofp.ControllerRoleMaster {
				t.Fatalf("session unusable after the malformed reply: %v, %v", rr, err)
			}
		})
	}
}

// TestRequestRoleTimeout: an unanswered request fails after Config.BarrierTimeout on the
// server's clock, leaving the session open.
func TestRequestRoleTimeout(t *testing.T) {
	h := newRecHandler()
	srv, clk := testServer(t, Config{BarrierTimeout: 3 * time.Second}, h)
	f := newFake(t, 0x304)
	f.roleHook = func(ofwire.Frame) {}
	f.connect(srv.Addr())
	sw := h.wait(t, "connected").sw
	done := make(chan error, 1)
	go func() {
		_, err := sw.RequestRole(context.Background(), ofp.ControllerRoleMaster, 1)
		done <- err
	}()
	if d := clk.waitTimer(t); d != 3*time.Second {
		t.Fatalf("role reply timer %v, want the configured 3s", d)
	}
	clk.Advance(3 * time.Second)
	select {
	case err := <-done:
		if !errors.Is(err, ErrReplyTimeout) || !strings.Contains(err.Error(), "0000000000000304") {
			t.Fatalf("RequestRole error %v, want ErrReplyTimeout naming the switch", err)
		}
	case <-time.After(guard):
		t.Fatal("RequestRole did not time out")
	}
	if sw.Err() != nil {
		t.Errorf("session closed by a role timeout: %v", sw.Err())
	}
}

// TestRequestRoleEnds: a request waiting for its reply returns when its context ends, and
// when the session ends (ErrSessionClosed, with the cause).
func TestRequestRoleEnds(t *testing.T) {
	h := newRecHandler()
	srv, _ := testServer(t, Config{}, h)
	f := newFake(t, 0x305)
	f.roleHook = func(ofwire.Frame) {}
	f.connect(srv.Addr())
	sw := h.wait(t, "connected").sw

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := sw.RequestRole(ctx, ofp.ControllerRoleMaster, 1)
		done <- err
	}()
	f.next(of.TypeRoleRequest)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("RequestRole after cancel: %v, want context.Canceled", err)
	}

	go func() {
		_, err := sw.RequestRole(context.Background(), ofp.ControllerRoleMaster, 2)
		done <- err
	}()
	f.next(of.TypeRoleRequest)
	f.conn.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrSessionClosed) {
			t.Fatalf("RequestRole when the session ended: %v, want ErrSessionClosed", err)
		}
	case <-time.After(guard):
		t.Fatal("RequestRole did not return when the session ended")
	}
	h.wait(t, "disconnected")
}

// TestRoleStatus: Open vSwitch's ONF role status, with or without properties, updates Role
// and wakes RoleChanged without counting a fault; writes as SLAVE then fail IsSlave.
func TestRoleStatus(t *testing.T) {
	h := newRecHandler()
	srv, _ := testServer(t, Config{}, h)
	f, sw := connectFake(t, srv, h, 0x306)
	if _, err := sw.RequestRole(context.Background(), ofp.ControllerRoleMaster, 5); err != nil {
		t.Fatal(err)
	}
	<-sw.RoleChanged()

	f.demote(6)
	select {
	case <-sw.RoleChanged():
	case <-time.After(guard):
		t.Fatal("RoleChanged did not wake for the role status")
	}
	if got := sw.Role(); got != (RoleReply{Role: ofp.ControllerRoleSlave, GenerationID: 6}) {
		t.Fatalf("Role after the role status = %v, want SLAVE 6", got)
	}
	_, err := sw.Apply(context.Background(), []Message{groupMod(ofp.GroupAdd, 1, 1)})
	if !IsSlave(err) || IsStale(err) {
		t.Fatalf("Apply as SLAVE: %v, want an error IsSlave matches", err)
	}

	// Properties after the fixed part are skipped; the stream stays in step.
	f.send(of.TypeExperiment, 0, roleStatusBody(2, 1, 7, make([]byte, 16)))
	testutil.Eventually(t, guard, func() (any, bool) { v := sw.Role().GenerationID; return v, v == 7 }, "role status with properties taken")
	if got := sw.Role(); got.Role != ofp.ControllerRoleMaster {
		t.Errorf("Role = %v, want MASTER 7", got)
	}
	if _, err := sw.RequestRole(context.Background(), ofp.ControllerRoleNoChange, 0); err != nil {
		t.Fatalf("session out of step after a role status with properties: %v", err)
	}
	faults := srv.Stats().Faults
	if faults[FaultMalformedRoleStatus] != 0 || faults[FaultIgnoredMessage] != 0 || faults[FaultUnsolicitedReply] != 0 {
		t.Errorf("a role status was counted as a fault: %v", faults)
	}
}

// TestExperimenterMessages: what an OFPT_EXPERIMENTER can be, read by the session's reader.
// Only a well-formed ONF role status changes Role; other experimenters stay ignored messages
// as before; a bad role status is counted; big bodies are skipped unread; the stream stays in
// step.
func TestExperimenterMessages(t *testing.T) {
	exp := func(experimenter, expType uint32, rest []byte) []byte {
		b := make([]byte, 8, 8+len(rest))
		binary.BigEndian.PutUint32(b[0:4], experimenter)
		binary.BigEndian.PutUint32(b[4:8], expType)
		return append(b, rest...)
	}
	slave9 := RoleReply{Role: ofp.ControllerRoleSlave, GenerationID: 9}
	equal := RoleReply{Role: ofp.ControllerRoleEqual}
	tests := []struct {
		name  string
		body  []byte
		fault Fault // numFaults: none
		role  RoleReply
	}{
		{"role status", roleStatusBody(3, 0, 9, nil), numFaults, slave9},
		{"role status with 64 KiB of properties", roleStatusBody(3, 0, 9, make([]byte, ofwire.MaxMessageLen-ofwire.HeaderLen-24)), numFaults, slave9},
		{"Nicira experimenter", exp(0x00002320, 1911, make([]byte, 16)), FaultIgnoredMessage, equal},
		{"ONF, another exp_type", exp(0x4f4e4600 /* ONF */, 1912, make([]byte, 16)), FaultIgnoredMessage, equal},
		{"no experimenter header", []byte{0x4f, 0x4e}, FaultIgnoredMessage, equal},
		{"empty", nil, FaultIgnoredMessage, equal},
		{"role status truncated", roleStatusBody(3, 0, 9, nil)[:20], FaultMalformedRoleStatus, equal},
		{"role status NOCHANGE", roleStatusBody(0, 0, 9, nil), FaultMalformedRoleStatus, equal},
		{"role status undefined role", roleStatusBody(4, 0, 9, nil), FaultMalformedRoleStatus, equal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stream bytes.Buffer
			msg, err := ofwire.EncodeMessage(of.TypeExperiment, 0, ofwire.RawBody(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			stream.Write(msg)
			sentinel, _ := ofwire.EncodeMessage(of.TypePacketIn, 0, ofwire.RawBody(ofwire.PacketInBody(7, 0, []byte("ok"))))
			stream.Write(sentinel)
			sw := bareSwitch(bytes.NewReader(stream.Bytes()), Config{})
			sw.readN(t, 2)
			if pi := <-sw.packetIns; pi.InPort != 7 {
				t.Errorf("sentinel packet-in in_port %d, want 7", pi.InPort)
			}
			for f := range numFaults {
				want := uint64(0)
				if f == tt.fault {
					want = 1
				}
				if got := sw.srv.faults[f].Load(); got != want {
					t.Errorf("%s = %d, want %d", f, got, want)
				}
			}
			if got := sw.Role(); got != tt.role {
				t.Errorf("Role = %v, want %v", got, tt.role)
			}
			if woke := roleWoken(sw); woke != (tt.role != equal) {
				t.Errorf("RoleChanged woke %v, want %v", woke, tt.role != equal)
			}
		})
	}
}

// TestUnsolicitedRoleReply: a ROLE_REPLY nobody waits for, or a repeat of one taken, is
// counted and discarded, and does not change Role.
func TestUnsolicitedRoleReply(t *testing.T) {
	sw := bareSwitch(bytes.NewReader(nil), Config{})
	w := newWaiter(waitRole)
	sw.register(w, 8)
	var stream bytes.Buffer
	for _, xid := range []uint32{9, 8, 8} {
		m, _ := ofwire.EncodeMessage(of.TypeRoleReply, xid, ofwire.RawBody(roleBody(uint32(xid-6), uint64(xid))))
		stream.Write(m)
	}
	sw.br.Reset(&stream)
	sw.readN(t, 3)
	if n := sw.srv.faults[FaultUnsolicitedReply].Load(); n != 2 {
		t.Errorf("unsolicited_reply = %d, want 2 (unknown xid, repeat)", n)
	}
	if rr, err, _ := w.roleState(); err != nil || rr != (RoleReply{Role: ofp.ControllerRoleMaster, GenerationID: 8}) {
		t.Errorf("waiter holds %v, %v; want MASTER 8", rr, err)
	}
	if got := sw.Role(); got != (RoleReply{Role: ofp.ControllerRoleMaster, GenerationID: 8}) {
		t.Errorf("Role = %v, want MASTER 8 from the one solicited reply", got)
	}
}

func TestIsStaleIsSlave(t *testing.T) {
	op := func(typ, code uint16) error {
		return newOpError(0x1, 7, Message{Type: of.TypeGroupMod}, ofwire.ErrorMsg{Type: typ, Code: code})
	}
	stale, slave := op(11, 0), op(1, 10)
	tests := []struct {
		name         string
		err          error
		isStale, isS bool
	}{
		{"nil", nil, false, false},
		{"plain", errors.New("OFPRRFC_STALE"), false, false},
		{"stale", stale, true, false},
		{"is slave", slave, false, true},
		{"wrapped stale", fmt.Errorf("leader: %w", stale), true, false},
		{"wrapped is slave", fmt.Errorf("apply: %w", slave), false, true},
		{"joined, second is slave", errors.Join(op(6, 0), slave), false, true},
		{"wrapped join", fmt.Errorf("stage 0: %w", errors.Join(op(6, 8), fmt.Errorf("x: %w", stale))), true, false},
		{"role request unsupported", op(11, 1), false, false},
		{"bad role", op(11, 2), false, false},
		{"bad request, other code", op(1, 9), false, false},
		{"code 10 of another type", op(6, 10), false, false},
		{"code 0 of another type", op(1, 0), false, false},
		{"experimenter", op(0xffff, 0), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsStale(tt.err); got != tt.isStale {
				t.Errorf("IsStale(%v) = %v, want %v", tt.err, got, tt.isStale)
			}
			if got := IsSlave(tt.err); got != tt.isS {
				t.Errorf("IsSlave(%v) = %v, want %v", tt.err, got, tt.isS)
			}
		})
	}
}

func TestRoleErrorNames(t *testing.T) {
	for _, tt := range []struct {
		typ, code uint16
		tn, cn    string
	}{
		{errTypeRoleRequestFailed, errCodeStale, "OFPET_ROLE_REQUEST_FAILED", "OFPRRFC_STALE"},
		{errTypeBadRequest, errCodeIsSlave, "OFPET_BAD_REQUEST", "OFPBRC_IS_SLAVE"},
	} {
		if tn, cn := ofwire.ErrorName(tt.typ, tt.code); tn != tt.tn || cn != tt.cn {
			t.Errorf("ofwire.ErrorName(%d, %d) = %s/%s, want %s/%s", tt.typ, tt.code, tn, cn, tt.tn, tt.cn)
		}
	}
	if got := RoleName(ofp.ControllerRole(9)); got != "OFPCR_ROLE(9)" {
		t.Errorf("RoleName(9) = %q", got)
	}
}
