//go:build integration

package dataplane

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"flowweight/controller/ofswitch"
	"flowweight/controller/ofwire"
	"flowweight/e2e/lab"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// ovsLab is one ovsdb-server + ovs-vswitchd (userspace datapath) in a temp dir with one
// bridge listening for a controller on 127.0.0.1.
type ovsLab struct {
	t      testing.TB
	dir    string
	env    []string
	bridge string
	port   int
}

func need(t testing.TB, bins ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, b := range bins {
		p, err := exec.LookPath(b)
		if err != nil {
			t.Fatalf("%s not found (install openvswitch-switch): %v", b, err)
		}
		out[b] = p
	}
	return out
}

func (l *ovsLab) run(name string, args ...string) string {
	l.t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = l.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		l.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// start launches a daemon in the foreground (so we hold its PID) and kills it at cleanup.
func (l *ovsLab) start(name string, args ...string) {
	l.t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = l.env
	logf, err := os.Create(filepath.Join(l.dir, filepath.Base(name)+".out"))
	if err != nil {
		l.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		l.t.Fatalf("starting %s: %v", name, err)
	}
	pid := cmd.Process.Pid
	l.t.Cleanup(func() {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(pid, syscall.SIGKILL)
			<-done
		}
		logf.Close()
	})
}

func (l *ovsLab) waitFor(what string, ok func() bool) {
	l.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if ok() {
			return
		}
	}
	l.t.Fatalf("timed out waiting for %s", what)
}

func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func newOVSLab(t testing.TB) *ovsLab {
	bins := need(t, "ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovs-ofctl")
	release, err := lab.ClaimHost() // one userspace switch per host at a time (e2e/lab)
	if err != nil {
		t.Fatalf("claim the host for a userspace Open vSwitch: %v", err)
	}
	t.Cleanup(func() { _ = release() })
	dir := t.TempDir()
	l := &ovsLab{t: t, dir: dir, port: freePort(t),
		bridge: fmt.Sprintf("fwdp%d", os.Getpid()%100000)}
	l.env = append(os.Environ(), "OVS_RUNDIR="+dir, "OVS_DBDIR="+dir, "OVS_LOGDIR="+dir,
		"OVS_SYSCONFDIR="+dir, "OVS_PKGDATADIR=/usr/share/openvswitch")
	schema := "/usr/share/openvswitch/vswitch.ovsschema"
	if _, err := os.Stat(schema); err != nil {
		t.Fatalf("OVS schema: %v", err)
	}
	db := filepath.Join(dir, "conf.db")
	sock := "unix:" + filepath.Join(dir, "db.sock")
	l.run(bins["ovsdb-tool"], "create", db, schema)
	l.start(bins["ovsdb-server"], db, "--remote=p"+sock, "--pidfile="+filepath.Join(dir, "ovsdb-server.pid"),
		"--unixctl="+filepath.Join(dir, "ovsdb-server.ctl"), "--log-file="+filepath.Join(dir, "ovsdb-server.log"))
	l.waitFor("ovsdb-server socket", func() bool { _, err := os.Stat(filepath.Join(dir, "db.sock")); return err == nil })
	vsctl := func(args ...string) string {
		return l.run(bins["ovs-vsctl"], append([]string{"--db=" + sock, "--timeout=10"}, args...)...)
	}
	vsctl("--no-wait", "init")
	l.start(bins["ovs-vswitchd"], sock, "--disable-system", "--pidfile="+filepath.Join(dir, "ovs-vswitchd.pid"),
		"--unixctl="+filepath.Join(dir, "ovs-vswitchd.ctl"), "--log-file="+filepath.Join(dir, "ovs-vswitchd.log"))
	vsctl("add-br", l.bridge, "--", "set", "bridge", l.bridge, "datapath_type=netdev", "protocols=OpenFlow13",
		"fail-mode=secure", "--", "set-controller", l.bridge, fmt.Sprintf("ptcp:%d:127.0.0.1", l.port))
	// Remove the bridge (and its LOCAL tap) before the daemons go; registered after them, so
	// it runs first.
	t.Cleanup(func() {
		cmd := exec.Command(bins["ovs-vsctl"], "--db="+sock, "--timeout=10", "--if-exists", "del-br", l.bridge)
		cmd.Env = l.env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("del-br: %v\n%s", err, out)
		}
	})
	// On failure, keep what the switch held with the test output.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("dump-flows:\n%s", l.ofctlQuiet("dump-flows"))
			t.Logf("dump-groups:\n%s", l.ofctlQuiet("dump-groups"))
		}
	})
	l.waitFor("bridge management socket", func() bool { _, err := os.Stat(l.mgmt()); return err == nil })
	return l
}

func (l *ovsLab) mgmt() string { return filepath.Join(l.dir, l.bridge+".mgmt") }

func (l *ovsLab) ofctl(cmd string, args ...string) string {
	l.t.Helper()
	return l.run("ovs-ofctl", append([]string{"-O", "OpenFlow13", cmd, "unix:" + l.mgmt()}, args...)...)
}

func (l *ovsLab) ofctlQuiet(cmd string) string {
	c := exec.Command("ovs-ofctl", "-O", "OpenFlow13", cmd, "unix:"+l.mgmt())
	c.Env = l.env
	out, err := c.CombinedOutput()
	if err != nil {
		return fmt.Sprintf("%s: %v\n%s", cmd, err, out)
	}
	return string(out)
}

// ofConn is a bare OpenFlow 1.3 connection to the bridge's passive controller listener.
type ofConn struct {
	t   testing.TB
	c   net.Conn
	r   *bufio.Reader
	xid uint32
}

func (l *ovsLab) dial() *ofConn {
	l.t.Helper()
	var c net.Conn
	l.waitFor("controller listener", func() bool {
		var err error
		c, err = net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", l.port), time.Second)
		return err == nil
	})
	l.t.Cleanup(func() { c.Close() })
	oc := &ofConn{t: l.t, c: c, r: bufio.NewReader(c), xid: 100}
	oc.write(of.TypeHello, 1, nil)
	typ, _, _ := oc.read()
	if typ != of.TypeHello {
		l.t.Fatalf("first message from the switch is %v, want HELLO", typ)
	}
	return oc
}

func (o *ofConn) write(typ of.Type, xid uint32, body []byte) {
	o.t.Helper()
	b, err := ofwire.EncodeMessage(typ, xid, ofwire.RawBody(body))
	if err != nil {
		o.t.Fatalf("encode %v: %v", typ, err)
	}
	_ = o.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := o.c.Write(b); err != nil {
		o.t.Fatalf("write %v: %v", typ, err)
	}
}

// read returns the next message that is not an echo request (those are answered).
func (o *ofConn) read() (of.Type, uint32, []byte) {
	o.t.Helper()
	for {
		_ = o.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		f, err := ofwire.ReadFrame(o.r)
		if err != nil {
			o.t.Fatalf("reading from switch: %v", err)
		}
		typ, xid, body := f.Type, f.Xid, f.Body
		if typ == of.TypeEchoRequest {
			o.write(of.TypeEchoReply, xid, body)
			continue
		}
		return typ, xid, body
	}
}

// switchError is an OFPT_ERROR reply naming the message it answers.
type switchError struct {
	typ, code uint16
	desc      string
}

func (e *switchError) Error() string {
	return fmt.Sprintf("switch error type %d code %d for %q", e.typ, e.code, e.desc)
}

// apply sends each stage followed by a barrier, as ofswitch does, and returns the switch's
// errors mapped back to the messages' Desc.
func (o *ofConn) apply(stages [][]ofswitch.Message) error {
	o.t.Helper()
	var errs []error
	for _, stage := range stages {
		descs := map[uint32]string{}
		for _, m := range stage {
			o.xid++
			descs[o.xid] = m.Desc
			o.write(m.Type, o.xid, bodyBytes(o.t, m))
		}
		o.xid++
		barrier := o.xid
		o.write(of.TypeBarrierRequest, barrier, nil)
		for {
			typ, xid, body := o.read()
			if typ == of.TypeError {
				e := &switchError{desc: descs[xid]}
				if len(body) >= 4 {
					e.typ, e.code = binary.BigEndian.Uint16(body), binary.BigEndian.Uint16(body[2:])
				}
				errs = append(errs, e)
				continue
			}
			if typ == of.TypeBarrierReply && xid == barrier {
				break
			}
		}
	}
	return errors.Join(errs...)
}

func bodyBytes(t testing.TB, m ofswitch.Message) []byte {
	t.Helper()
	if m.Body == nil {
		return nil
	}
	var b strings.Builder
	if _, err := m.Body.WriteTo(&b); err != nil {
		t.Fatalf("encoding %s: %v", m.Desc, err)
	}
	return []byte(b.String())
}

// multipart sends one request and returns the concatenated reply bodies (without the
// ofp_multipart_reply headers), the form ofswitch.Multipart returns.
func (o *ofConn) multipart(typ ofp.MultipartType, body io.WriterTo) []byte {
	o.t.Helper()
	req := binary.BigEndian.AppendUint16(nil, uint16(typ))
	req = append(req, 0, 0, 0, 0, 0, 0)
	if body != nil {
		var b strings.Builder
		if _, err := body.WriteTo(&b); err != nil {
			o.t.Fatal(err)
		}
		req = append(req, b.String()...)
	}
	o.xid++
	xid := o.xid
	o.write(of.TypeMultipartRequest, xid, req)
	var out []byte
	for {
		t, x, b := o.read()
		if x != xid {
			continue
		}
		if t == of.TypeError {
			o.t.Fatalf("multipart %v refused: %x", typ, b)
		}
		if t != of.TypeMultipartReply || len(b) < 8 {
			o.t.Fatalf("multipart %v answered with %v (%d bytes)", typ, t, len(b))
		}
		out = append(out, b[8:]...)
		if binary.BigEndian.Uint16(b[2:])&1 == 0 {
			return out
		}
	}
}

func (o *ofConn) readBack() State {
	o.t.Helper()
	var s State
	var err error
	if s.Groups, err = DecodeGroupDesc(o.multipart(ofp.MultipartTypeGroupDescription, nil)); err != nil {
		o.t.Fatalf("DecodeGroupDesc of Open vSwitch's reply: %v", err)
	}
	if s.Flows, err = DecodeFlowStats(o.multipart(ofp.MultipartTypeFlow, OwnFlowsRequest())); err != nil {
		o.t.Fatalf("DecodeFlowStats of Open vSwitch's reply: %v", err)
	}
	return s
}

// ofpPrint decodes our own message with ovs-ofctl.
func ofpPrint(t *testing.T, m ofswitch.Message) string {
	t.Helper()
	out, err := exec.Command("ovs-ofctl", "-O", "OpenFlow13", "ofp-print", hexOf(messageHex(t, m, 1))).CombinedOutput()
	if err != nil || strings.Contains(string(out), "decode error") {
		t.Fatalf("ofp-print of %q: %v\n%s", m.Desc, err, out)
	}
	return string(out)
}

var (
	// Anchored on whitespace so that ct(table=1,…) inside actions is left alone.
	reTable  = regexp.MustCompile(`(?:^|\s)table[:=](\d+),?(?:\s|$)`)
	reCookie = regexp.MustCompile(`(?:^|\s)cookie[:=](0x[0-9a-f]+),?(?:\s|$)`)
	reStats  = regexp.MustCompile(`\b(duration|n_packets|n_bytes|idle_age|hard_age|reset_counts|send_flow_rem)[=:]?[^ ,]*,? ?`)
)

// normFlow turns either `ovs-ofctl ofp-print` of a FLOW_MOD ADD or a `dump-flows` line into
// "table=N cookie=C <priority, match and actions>", so that what we sent and what the switch
// holds compare as text in Open vSwitch's own words.
func normFlow(s string) string {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "ADD ")
	table := "0"
	if m := reTable.FindStringSubmatch(s); m != nil {
		table = m[1]
		s = strings.Replace(s, m[0], " ", 1)
	}
	cookie := "0x0"
	if m := reCookie.FindStringSubmatch(s); m != nil {
		cookie = m[1]
		s = strings.Replace(s, m[0], " ", 1)
	}
	s = reStats.ReplaceAllString(s, "")
	s = strings.Join(strings.Fields(s), " ")
	return fmt.Sprintf("table=%s cookie=%s %s", table, cookie, s)
}

// expectedText returns, in Open vSwitch's words, the flows and groups desired should leave.
func expectedText(t *testing.T, desired State) (flows, groups []string) {
	for _, stage := range Plan(desired, State{}) {
		for _, m := range stage {
			out := ofpPrint(t, m)
			_, line, _ := strings.Cut(out, "):")
			line = strings.TrimSpace(line)
			if m.Type == of.TypeFlowMod {
				flows = append(flows, normFlow(line))
			} else {
				groups = append(groups, strings.TrimPrefix(line, "ADD "))
			}
		}
	}
	slices.Sort(flows)
	slices.Sort(groups)
	return flows, groups
}

func (l *ovsLab) heldText() (flows, groups []string) {
	for _, line := range strings.Split(l.ofctl("dump-flows"), "\n") {
		if strings.Contains(line, "priority=") || strings.Contains(line, "actions=") {
			flows = append(flows, normFlow(line))
		}
	}
	for _, line := range strings.Split(l.ofctl("dump-groups"), "\n") {
		if strings.Contains(line, "group_id=") {
			groups = append(groups, strings.TrimSpace(line))
		}
	}
	slices.Sort(flows)
	slices.Sort(groups)
	return flows, groups
}

// checkHeld asserts that the bridge holds exactly desired: byte for byte through our
// decoders, and as text through ovs-ofctl.
func checkHeld(t *testing.T, l *ovsLab, o *ofConn, desired State) {
	t.Helper()
	got := o.readBack()
	if !got.Equal(desired) {
		t.Errorf("read-back differs from desired:\n got %v\nwant %v", got, desired)
	}
	if p := Plan(desired, got); len(p) != 0 {
		t.Errorf("Plan(desired, read-back) is not empty: %s", describe(p))
	}
	wantFlows, wantGroups := expectedText(t, desired)
	heldFlows, heldGroups := l.heldText()
	if !slices.Equal(heldFlows, wantFlows) {
		t.Errorf("dump-flows\n%s\nwant\n%s", strings.Join(heldFlows, "\n"), strings.Join(wantFlows, "\n"))
	}
	if !slices.Equal(heldGroups, wantGroups) {
		t.Errorf("dump-groups\n%s\nwant\n%s", strings.Join(heldGroups, "\n"), strings.Join(wantGroups, "\n"))
	}
}

func TestOVSPlans(t *testing.T) {
	l := newOVSLab(t)
	o := l.dial()
	// Output ports 1 and 2 need not exist for OVS to accept the flows.
	steps := []struct {
		name     string
		services []Service
		opt      Options
		// messages is the exact plan size expected from the previous step (-1: any).
		messages int
	}{
		{"conntrack from empty", []Service{webService(ModeConntrack)}, DefaultOptions(), -1},
		// 100:50 → 100:100 changes the slots (64-slot layout: 42+1/21 → 31+1/32).
		{"weights only", []Service{withBackends(webService(ModeConntrack), func(b *Backend) { b.Weight += 50 * b.Index })}, DefaultOptions(), 1},
		{"backend c resolved", []Service{withBackends(webService(ModeConntrack), func(b *Backend) {
			b.Weight += 50 * b.Index
			if b.MAC == nil {
				b.MAC, b.SwitchPort = mac("02:00:00:00:00:03"), 3
			}
		})}, DefaultOptions(), 3}, // group modify + forward and return flows of c
		{"backend b removed", []Service{func() Service {
			s := webService(ModeConntrack)
			s.Backends = s.Backends[:1]
			return s
		}()}, DefaultOptions(), -1},
		// Client affinity: Open vSwitch takes the learn, resubmit and reg flows and reads them
		// back byte for byte; udp learns on udp_dst; turning it off removes tables 4 to 6.
		{"affinity", []Service{affinityService()}, DefaultOptions(), -1},
		{"affinity, udp", func() []Service {
			s := affinityService()
			s.Protocol = "udp"
			return []Service{s}
		}(), DefaultOptions(), -1},
		{"affinity off", []Service{webService(ModeConntrack)}, DefaultOptions(), -1},
		{"stateless", []Service{webService(ModeStateless)}, DefaultOptions(), -1},
		{"mixed, udp", func() []Service {
			s := scenarios()["mixed"]
			s[1].Protocol = "udp"
			return s
		}(), Options{}, -1},
		{"no reachable backend", scenarios()["all unresolved"], DefaultOptions(), -1},
		{"ipv6 conntrack", scenarios()["ipv6 conntrack"], DefaultOptions(), -1},
		{"ipv6 stateless", scenarios()["ipv6 stateless"], DefaultOptions(), -1},
		{"dual stack", scenarios()["dual stack"], DefaultOptions(), -1},
		{"nothing", nil, Options{}, -1},
	}
	for _, st := range steps {
		if t.Failed() {
			return
		}
		t.Run(st.name, func(t *testing.T) {
			o.t = t
			desired := Desired(st.services, st.opt)
			plan := Plan(desired, o.readBack())
			if st.messages >= 0 && countMessages(plan) != st.messages {
				t.Errorf("plan has %d messages, want %d: %s", countMessages(plan), st.messages, describe(plan))
			}
			if err := o.apply(plan); err != nil {
				t.Fatalf("Open vSwitch rejected the plan: %v", err)
			}
			checkHeld(t, l, o, desired)
			if strings.HasPrefix(st.name, "ipv6") {
				t.Logf("dump-flows and dump-groups (docs/dataplane.md):\n%s%s", l.ofctl("dump-flows"), l.ofctl("dump-groups"))
			}
		})
	}
}

// TestOVSRejectsLikeFake checks the fake switch's error model against Open vSwitch.
func TestOVSRejectsLikeFake(t *testing.T) {
	l := newOVSLab(t)
	o := l.dial()
	o.t = t
	g := Group{ID: 3, Type: ofp.GroupTypeSelect, Buckets: []Bucket{{Weight: 1, Actions: encodeActions(ofp.Actions{output(1, 0)})}}}
	toGroup := Flow{Table: 0, Priority: 1, Cookie: MakeCookie(1, X, KindVIP), Match: mustMatch(t, ethType(0x0800)),
		Instructions: encodeInstructions(apply(&ofp.ActionGroup{Group: 4}))}
	cases := []struct {
		name      string
		setup     []ofswitch.Message
		msg       ofswitch.Message
		typ, code uint16
	}{
		{"add existing group", []ofswitch.Message{groupMessage(ofp.GroupAdd, g)}, groupMessage(ofp.GroupAdd, g), ErrTypeGroupModFailed, CodeGroupExists},
		{"modify missing group", nil, groupMessage(ofp.GroupModify, Group{ID: 99, Type: ofp.GroupTypeSelect}), ErrTypeGroupModFailed, CodeUnknownGroup},
		{"flow to missing group", nil, flowMessage(ofp.FlowAdd, toGroup), ErrTypeBadAction, CodeBadOutGroup},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o.t = t
			if err := o.apply([][]ofswitch.Message{tc.setup}); err != nil {
				t.Fatal(err)
			}
			err := o.apply([][]ofswitch.Message{{tc.msg}})
			var se *switchError
			if !errors.As(err, &se) || se.typ != tc.typ || se.code != tc.code || se.desc != tc.msg.Desc {
				t.Fatalf("Open vSwitch answered %v, want type %d code %d for %q", err, tc.typ, tc.code, tc.msg.Desc)
			}
			sw := NewFakeSwitch()
			if err := sw.Apply(tc.setup); err != nil {
				t.Fatal(err)
			}
			var fe *OFError
			if err := sw.Apply([]ofswitch.Message{tc.msg}); !errors.As(err, &fe) || fe.Type != se.typ || fe.Code != se.code {
				t.Fatalf("fake switch answered %v, Open vSwitch type %d code %d", err, se.typ, se.code)
			}
		})
	}
}

// TestOVSEncodesLikeUs has Open vSwitch encode the conntrack design from hand-written
// ovs-ofctl text (the rules of docs/design.md, not our bytes), reads its groups and flows back, and
// requires them to equal Desired byte for byte: golden bytes from Open vSwitch's own encoder.
func TestOVSEncodesLikeUs(t *testing.T) {
	l := newOVSLab(t)
	o := l.dial()
	o.t = t
	// Weights 100:50 in the 64-slot layout (Options{}: unknown switch): 43/21 slots, one of the
	// first backend's in the extra one-slot bucket at the end.
	groups := `group_id=10,type=select,bucket=weight:42,actions=ct(commit,zone=7,nat(dst=10.0.0.1:8080),table=2),bucket=weight:21,actions=ct(commit,zone=7,nat(dst=10.0.0.2:80),table=2),bucket=weight:1,actions=ct(commit,zone=7,nat(dst=10.0.0.1:8080),table=2)
`
	flows := `cookie=0xf1e00001ffff0001,table=0,priority=300,arp,arp_tpa=10.0.0.100,actions=CONTROLLER:65535
cookie=0xf1e00001ffff0002,table=0,priority=200,tcp,nw_dst=10.0.0.100,tp_dst=80,actions=ct(zone=7,nat,table=1)
cookie=0xf1e0000100000007,table=0,priority=100,tcp,nw_src=10.0.0.1,tp_src=8080,actions=ct(zone=7,nat,table=3)
cookie=0xf1e0000100010007,table=0,priority=100,tcp,nw_src=10.0.0.2,tp_src=80,actions=ct(zone=7,nat,table=3)
cookie=0xf1e00001ffff0003,table=1,priority=200,ct_state=+new+trk,tcp,nw_dst=10.0.0.100,tp_dst=80,actions=group:10
cookie=0xf1e0ffffffff0004,table=1,priority=100,ct_state=+est+trk,actions=goto_table:2
cookie=0xf1e0ffffffff0005,table=1,priority=100,ct_state=+rel+trk,actions=goto_table:2
cookie=0xf1e0000100000006,table=2,priority=100,ip,nw_dst=10.0.0.1,actions=set_field:02:00:00:00:00:01->eth_dst,output:1
cookie=0xf1e0000100010006,table=2,priority=100,ip,nw_dst=10.0.0.2,actions=set_field:02:00:00:00:00:02->eth_dst,output:2
cookie=0xf1e00001ffff0008,table=3,priority=100,ip,nw_src=10.0.0.100,actions=set_field:02:00:00:00:01:00->eth_src,NORMAL
cookie=0xf1e0ffffffff0009,table=3,priority=0,actions=NORMAL
`
	gf := filepath.Join(l.dir, "groups.txt")
	ff := filepath.Join(l.dir, "flows.txt")
	if err := os.WriteFile(gf, []byte(groups), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ff, []byte(flows), 0o644); err != nil {
		t.Fatal(err)
	}
	l.ofctl("add-groups", gf)
	l.ofctl("add-flows", ff)
	got := o.readBack()
	want := Desired([]Service{webService(ModeConntrack)}, Options{})
	if !slices.EqualFunc(got.Groups, want.Groups, Group.Equal) {
		t.Errorf("Open vSwitch's encoding of the groups\n%v\nours\n%v", got.Groups, want.Groups)
	}
	if !slices.Equal(got.Flows, want.Flows) {
		for _, f := range got.Flows {
			if !slices.Contains(want.Flows, f) {
				t.Errorf("Open vSwitch encoded a flow we do not plan: %v", f)
			}
		}
		for _, f := range want.Flows {
			if !slices.Contains(got.Flows, f) {
				t.Errorf("we plan a flow Open vSwitch encoded differently: %v", f)
			}
		}
	}
	if p := Plan(want, got); len(p) != 0 {
		t.Errorf("Plan against Open vSwitch's own encoding is not empty: %s", describe(p))
	}
}
