//go:build integration

package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"flowweight/controller/balancer"
	"flowweight/controller/config"
	"flowweight/e2e/lab"
)

// placementConfig is two services on pinned backends (the bridges have no hosts): "all" on
// every switch, "some" on the datapaths given.
func placementConfig(t *testing.T, keyFile string, some ...uint64) *config.Config {
	t.Helper()
	dp := ""
	for i, d := range some {
		if i > 0 {
			dp += ", "
		}
		dp += fmt.Sprintf("%q", fmt.Sprintf("%016x", d))
	}
	text := fmt.Sprintf(`[controller]
listen = "127.0.0.1:0"
update_period = "200ms"
readback_period = "1s"
[api]
listen = ""
[collector]
push_listen = "127.0.0.1:0"
key_file = %q
[[service]]
name = "all"
vip = "10.61.0.100"
port = 80
group_id = 61
  [[service.backend]]
  name = "a1"
  ip = "10.61.0.1"
  mac = "02:00:00:61:00:01"
  switch_port = 1
  [[service.backend]]
  name = "a2"
  ip = "10.61.0.2"
  mac = "02:00:00:61:00:02"
  switch_port = 2
[[service]]
name = "some"
vip = "10.62.0.100"
port = 80
group_id = 62
datapaths = [%s]
  [[service.backend]]
  name = "s1"
  ip = "10.62.0.1"
  mac = "02:00:00:62:00:01"
  switch_port = 3
`, keyFile, dp)
	c, err := config.Parse("placement.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestPlacementOnRealSwitches: three bridges of one ovs-vswitchd on one controller; a service
// without datapaths is on all three, one naming a datapath is on that bridge only, and a
// reload that names another moves it there (its group and flows deleted where it was).
func TestPlacementOnRealSwitches(t *testing.T) {
	dir, err := os.MkdirTemp("", "fwplace-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	l, err := lab.New(filepath.Join(dir, "lab"), testLog{t})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
	ovs, err := l.StartOVS()
	if err != nil {
		t.Fatal(err)
	}
	var bridges []*lab.Bridge
	for i := range 3 {
		br, err := ovs.AddBridge(fmt.Sprintf("p%d", i), "", "secure")
		if err != nil {
			t.Fatal(err)
		}
		bridges = append(bridges, br)
	}
	key := filepath.Join(dir, "push.key")
	if err := os.WriteFile(key, []byte("placement-test-key-0123456789abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := balancer.New(placementConfig(t, key, bridges[1].DPID), balancer.Options{Logger: slog.New(slog.NewTextHandler(testLog{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx, func(of, _ net.Addr) { ready <- of }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	var of net.Addr
	select {
	case of = <-ready:
	case err := <-done:
		t.Fatalf("controller: %v", err)
	}
	for _, br := range bridges {
		if _, err := ovs.Vsctl("set-controller", br.Name, "tcp:"+of.String()); err != nil {
			t.Fatal(err)
		}
	}

	groupsOn := func(br *lab.Bridge) ([]uint32, error) {
		out, err := br.DumpGroups()
		if err != nil {
			return nil, err
		}
		gs, err := lab.ParseGroups(out)
		if err != nil {
			return nil, err
		}
		var ids []uint32
		for _, g := range gs {
			ids = append(ids, g.ID)
		}
		slices.Sort(ids)
		return ids, nil
	}
	expect := func(what string, want ...[]uint32) {
		t.Helper()
		if _, err := waitFor(20*time.Second, func() error {
			for i, br := range bridges {
				got, err := groupsOn(br)
				if err != nil {
					return err
				}
				if !slices.Equal(got, want[i]) {
					return fmt.Errorf("bridge %s holds groups %v, want %v", br.Name, got, want[i])
				}
			}
			return nil
		}); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	expect("placed on the second bridge", []uint32{61}, []uint32{61, 62}, []uint32{61})

	// The VIP of "some" gets its ARP flow only where the service is.
	flows, err := bridges[0].DumpFlows()
	if err != nil {
		t.Fatal(err)
	}
	if containsAny(flows, "10.62.0.100") {
		t.Errorf("bridge %s has flows for a service placed elsewhere:\n%s", bridges[0].Name, flows)
	}

	if err := b.Reload(placementConfig(t, key, bridges[2].DPID)); err != nil {
		t.Fatal(err)
	}
	expect("moved to the third bridge by a reload", []uint32{61}, []uint32{61}, []uint32{61, 62})
	flows, err = bridges[1].DumpFlows()
	if err != nil {
		t.Fatal(err)
	}
	if containsAny(flows, "10.62.0.100", "cookie=0xf1e0003e") {
		t.Errorf("bridge %s kept flows of the service that moved away:\n%s", bridges[1].Name, flows)
	}
}

func containsAny(s string, subs ...string) bool {
	return slices.ContainsFunc(subs, func(x string) bool { return strings.Contains(s, x) })
}
