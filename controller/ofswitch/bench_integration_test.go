//go:build integration

package ofswitch

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/netrack/openflow/ofp"
)

// benchLab starts a Server and an Open vSwitch bridge connected to it, with select
// group 1 of n buckets installed through the session.
func benchLab(b *testing.B, n int) (*ovsLab, *Switch) {
	b.Helper()
	h := newRecHandler()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	_, port := serverOnFreePort(b, h, Config{Logger: quiet})
	lab := startOVSLab(b, port)
	sw := h.waitFor(b, "connected", ovsConnect).sw
	if _, err := sw.Apply(context.Background(), []Message{selectGroup(ofp.GroupAdd, 1, rotatingWeights(n, 0))}); err != nil {
		b.Fatal(err)
	}
	return lab, sw
}

// rotatingWeights gives n weights that differ from one iteration to the next, so every
// MODIFY is a real change for the switch.
func rotatingWeights(n, iter int) []uint16 {
	w := make([]uint16, n)
	for i := range w {
		w[i] = uint16(1 + (i*7+iter)%100)
	}
	return w
}

// benchRewrite measures one select GROUP_MOD MODIFY with n buckets plus the barrier round
// trip, through Apply, against the real switch.
func benchRewrite(b *testing.B, n int) {
	_, sw := benchLab(b, n)
	ctx := context.Background()
	var rtt time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := sw.Apply(ctx, []Message{selectGroup(ofp.GroupModify, 1, rotatingWeights(n, i+1))})
		if err != nil {
			b.Fatal(err)
		}
		rtt += res.BarrierRTT[0]
	}
	b.ReportMetric(float64(rtt.Microseconds())/float64(b.N), "barrier-µs/op")
}

func BenchmarkRewrite4(b *testing.B)  { benchRewrite(b, 4) }
func BenchmarkRewrite16(b *testing.B) { benchRewrite(b, 16) }
func BenchmarkRewrite64(b *testing.B) { benchRewrite(b, 64) }

// benchOfctl measures the same change made the way an operator would, one
// `ovs-ofctl -O OpenFlow13 mod-group` process per change (ovs-ofctl waits for its own
// barrier), on the same switch while our controller stays connected.
func benchOfctl(b *testing.B, n int) {
	lab, _ := benchLab(b, n)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		spec := []string{"group_id=1,type=select"}
		for j, w := range rotatingWeights(n, i+1) {
			spec = append(spec, fmt.Sprintf("bucket=weight:%d,actions=output:%d", w, j+1))
		}
		cmd := exec.Command("ovs-ofctl", "-O", "OpenFlow13", "mod-group", lab.mgmt(), strings.Join(spec, ","))
		cmd.Env = lab.env
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("ovs-ofctl mod-group: %v\n%s", err, out)
		}
	}
}

func BenchmarkOfctlModGroup4(b *testing.B)  { benchOfctl(b, 4) }
func BenchmarkOfctlModGroup16(b *testing.B) { benchOfctl(b, 16) }
func BenchmarkOfctlModGroup64(b *testing.B) { benchOfctl(b, 64) }
