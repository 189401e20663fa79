//go:build integration

package dataplane

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"flowweight/controller/ofswitch"
	"flowweight/controller/ofwire"
	"flowweight/internal/slots"

	"github.com/netrack/openflow/ofp"
)

// realTable is what ovs-vswitchd logged (ofproto_dpif at debug level) when it built one
// group's dp_hash table.
type realTable struct {
	nHash    int
	fallback bool
	hits     []int
}

var (
	reUsing  = regexp.MustCompile(`Using (\d+) hash values`)
	reBucket = regexp.MustCompile(`Bucket \d+: weight=(\d+), target=[0-9.]+ hits=(\d+)`)
)

// switchLog follows ovs-vswitchd's log file from where the last read stopped.
type switchLog struct {
	t    *testing.T
	path string
	off  int64
}

// next waits for the record of one group's selection method: the log is written
// asynchronously, so it may trail the barrier reply.
func (l *switchLog) next() realTable {
	l.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(l.path)
		if err != nil {
			l.t.Fatal(err)
		}
		seg := string(b[l.off:])
		end := -1
		for _, mark := range []string{"Use dp_hash with", "Falling back to default hash method."} {
			if i := strings.Index(seg, mark); i >= 0 && (end < 0 || i < end) {
				end = i
			}
		}
		if end >= 0 {
			if nl := strings.IndexByte(seg[end:], '\n'); nl >= 0 {
				rec := seg[:end+nl]
				l.off += int64(end + nl + 1)
				var r realTable
				if m := reUsing.FindStringSubmatch(rec); m != nil {
					r.nHash, _ = strconv.Atoi(m[1])
				}
				r.fallback = strings.Contains(rec, "Falling back")
				if !r.fallback {
					for _, m := range reBucket.FindAllStringSubmatch(rec, -1) {
						h, _ := strconv.Atoi(m[2])
						r.hits = append(r.hits, h)
					}
				}
				return r
			}
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("no selection-method record in %s after offset %d", l.path, l.off)
		}
		time.Sleep(20 * time.Millisecond) // polling a file another process appends to
	}
}

// TestOVSSlotTableMatchesModel installs groups on a real Open vSwitch and compares the slot
// table it logs with OVSSlots: raw weight vectors (the measured ones of docs/dataplane.md, a
// fallback, equal weights) and the layouts Desired plans for the benchmark vectors in both
// modes. The version comes from the switch's own DESC reply, decoded by ofwire.ParseDesc.
func TestOVSSlotTableMatchesModel(t *testing.T) {
	l := newOVSLab(t)
	o := l.dial()
	desc, err := ofwire.ParseDesc(o.multipart(ofp.MultipartTypeDescription, nil))
	if err != nil {
		t.Fatalf("ParseDesc of Open vSwitch's reply: %v", err)
	}
	v, err := SwitchVersion(desc.Hardware, desc.Software)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("ovs-vswitchd", "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), " "+v.String()) {
		t.Fatalf("DESC says %v, ovs-vswitchd --version says %q", v, out)
	}
	t.Logf("switch %+v: version %v, layout %d slots", desc, v, LayoutSlots(v))
	l.run("ovs-appctl", "-t", filepath.Join(l.dir, "ovs-vswitchd.ctl"), "vlog/set", "ofproto_dpif:file:dbg")
	log := &switchLog{t: t, path: filepath.Join(l.dir, "ovs-vswitchd.log")}
	if b, err := os.ReadFile(log.path); err == nil {
		log.off = int64(len(b))
	}

	type vector struct {
		name   string
		group  Group
		layout *GroupLayout // for planned groups: the backends' slots to check too
	}
	var vectors []vector
	id := uint32(100)
	raw := func(name string, w ...uint16) {
		g := Group{ID: id, Type: ofp.GroupTypeSelect}
		for _, x := range w {
			g.Buckets = append(g.Buckets, Bucket{Weight: x})
		}
		vectors = append(vectors, vector{name: name, group: g})
		id++
	}
	raw("700/200/100", 700, 200, 100)
	raw("equal thirds", 334, 333, 333)
	raw("25:50:100", 25, 50, 100)
	raw("178/51/26/1", 178, 51, 26, 1)
	raw("1:999 falls back", 1, 999)
	raw("1:200", 1, 200)
	raw("zero bucket", 0, 500, 500)
	raw("10 equal", slices.Repeat([]uint16{1}, 10)...)
	raw("16 equal of 2", slices.Repeat([]uint16{2}, 16)...)
	for _, bv := range benchVectors() {
		for _, mode := range []Mode{ModeConntrack, ModeStateless} {
			s := liveService(mode, bv.weights)
			s.GroupID = id
			id++
			opt := Options{OVS: v}
			d := Desired([]Service{s}, opt)
			lay := Layout(s, opt)
			vectors = append(vectors, vector{name: fmt.Sprintf("%s %s", bv.name, mode), group: d.Groups[0], layout: &lay})
		}
	}

	for _, vc := range vectors {
		if err := o.apply([][]ofswitch.Message{{groupMessage(ofp.GroupAdd, vc.group)}}); err != nil {
			t.Fatalf("%s: adding the group: %v", vc.name, err)
		}
		got := log.next()
		want := slots.OVS(weightsOf(vc.group), v)
		if got.nHash != want.NHash || got.fallback != want.Fallback || (!got.fallback && !slices.Equal(got.hits, want.Hits)) {
			t.Errorf("%s (weights %v): switch built n=%d fallback=%v hits=%v; model n=%d fallback=%v hits=%v",
				vc.name, short(weightsOf(vc.group)), got.nHash, got.fallback, short(got.hits), want.NHash, want.Fallback, short(want.Hits))
			continue
		}
		if vc.layout != nil {
			if got.fallback || got.nHash != LayoutSlots(v) {
				t.Errorf("%s: switch built %d slots (fallback %v), want the %d-slot layout", vc.name, got.nHash, got.fallback, LayoutSlots(v))
			}
			t.Logf("%s: %d buckets, %d slots: %v", vc.name, len(vc.group.Buckets), got.nHash, slotsOf(*vc.layout))
		} else {
			t.Logf("%s: %d slots (fallback %v), hits %v", vc.name, got.nHash, got.fallback, short(got.hits))
		}
	}
}

func slotsOf(l GroupLayout) []int {
	var s []int
	for _, b := range l.Backends {
		s = append(s, b.Slots)
	}
	return s
}

// short keeps long vectors readable in logs.
func short[T any](v []T) string {
	if len(v) <= 12 {
		return fmt.Sprint(v)
	}
	return fmt.Sprintf("%v … (%d)", v[:12], len(v))
}

// benchLayoutRewrite measures one reweight of a 64-backend service in the slot layout on the
// real switch: the GROUP_MOD MODIFY Plan makes (conntrack: 64 or 65 buckets of ct+nat;
// stateless: 256 one-slot buckets, KeepSlots applied) and its barrier, through a bare
// OpenFlow connection.
func benchLayoutRewrite(b *testing.B, mode Mode) {
	l := newOVSLab(b)
	o := l.dial()
	desc, err := ofwire.ParseDesc(o.multipart(ofp.MultipartTypeDescription, nil))
	if err != nil {
		b.Fatal(err)
	}
	v, err := SwitchVersion(desc.Hardware, desc.Software)
	if err != nil {
		b.Fatal(err)
	}
	opt := Options{OVS: v}
	// Two vectors in turn (backend i weighs i+1, then 64−i), so every MODIFY is a change.
	weights := func(iter int) []uint16 {
		w := make([]uint16, 64)
		for i := range w {
			w[i] = uint16(i + 1)
			if iter%2 == 1 {
				w[i] = uint16(64 - i)
			}
		}
		return w
	}
	group := func(iter int, cur State) State {
		d := Desired([]Service{liveService(mode, weights(iter))}, opt)
		return KeepSlots(State{Groups: d.Groups}, cur)
	}
	cur := group(0, State{})
	if err := o.apply(Plan(cur, State{})); err != nil {
		b.Fatal(err)
	}
	var bytes int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		next := group(i+1, cur)
		plan := Plan(next, cur)
		if len(plan) != 1 || len(plan[0]) != 1 {
			b.Fatalf("plan of %d stages, want one MODIFY", len(plan))
		}
		bytes = len(bodyBytes(b, plan[0][0])) + 8
		if err := o.apply(plan); err != nil {
			b.Fatal(err)
		}
		cur = next
	}
	b.ReportMetric(float64(bytes), "msg-bytes")
	b.ReportMetric(float64(len(cur.Groups[0].Buckets)), "buckets")
}

func BenchmarkOVSRewriteLayout64Conntrack(b *testing.B) { benchLayoutRewrite(b, ModeConntrack) }
func BenchmarkOVSRewriteLayout64Stateless(b *testing.B) { benchLayoutRewrite(b, ModeStateless) }
