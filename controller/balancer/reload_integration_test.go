//go:build integration

package balancer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"flowweight/controller/config"
	"flowweight/e2e/lab"
)

// TestTruncatedReloadKeepsSwitchFlows is the review's finding on a real Open vSwitch: a
// controller serving one service of three backends reloads a file cut short before its first
// [[service]]. Without a confirmation nothing may leave the switch; with one, the VIP's flows
// and group go (which shows the test can see a removal).
func TestTruncatedReloadKeepsSwitchFlows(t *testing.T) {
	dir, err := os.MkdirTemp("", "fwrl") // short: unix socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	l, err := lab.New(dir, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	o, err := l.StartOVS()
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "push.key")
	if err := os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	head := fmt.Sprintf("[controller]\nlisten = \"127.0.0.1:0\"\nupdate_period = \"1h\"\nreadback_period = \"1h\"\n[api]\nlisten = \"\"\n"+
		"[collector]\npush_listen = \"127.0.0.1:0\"\nkey_file = %q\n", key)
	full := head + `
[[service]]
name = "web"
vip = "10.77.0.100"
port = 80
group_id = 1
  [[service.backend]]
  name = "web1"
  ip = "10.77.0.11"
  mac = "02:00:00:00:00:11"
  switch_port = 2
  [[service.backend]]
  name = "web2"
  ip = "10.77.0.12"
  mac = "02:00:00:00:00:12"
  switch_port = 3
  [[service.backend]]
  name = "web3"
  ip = "10.77.0.13"
  mac = "02:00:00:00:00:13"
  switch_port = 4
`
	cfg, err := config.Parse("controller.toml", []byte(full))
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler), StatePath: filepath.Join(dir, "controller.state")})
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
			t.Errorf("controller: %v", err)
		}
	})
	var of net.Addr
	select {
	case of = <-ready:
	case err := <-done:
		t.Fatalf("controller did not start: %v", err)
	}
	br, err := o.AddBridge("br0", "tcp:"+of.String(), "secure")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			l.SaveDiagnostics(br, os.Stderr)
		}
	})
	ours := func() (flows, groups int) {
		out, err := br.DumpFlows()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "cookie=") && !strings.Contains(line, "cookie=0x0,") {
				flows++
			}
		}
		g, err := br.DumpGroups()
		if err != nil {
			t.Fatal(err)
		}
		groups = strings.Count(g, "group_id=")
		return flows, groups
	}
	var before int
	if err := lab.Poll(20*time.Second, func() error {
		f, g := ours()
		if f < 4 || g != 1 {
			return fmt.Errorf("switch holds %d of our flows and %d groups", f, g)
		}
		before = f
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	if err := b.ReloadFile("controller.toml", []byte(head), ReloadOptions{Trigger: "test"}); err == nil {
		t.Fatal("a file without its service was applied")
	}
	b.update(ctx, false) // a full plan and apply against the switch, now
	if f, g := ours(); f != before || g != 1 {
		t.Fatalf("a refused reload changed the switch: %d -> %d flows, %d groups", before, f, g)
	}

	if err := b.ReloadFile("controller.toml", []byte(head), ReloadOptions{Trigger: "test", AllowRemoval: true}); err != nil {
		t.Fatal(err)
	}
	b.update(ctx, false)
	// The switch's syncer applies the new intent on its own goroutine (and may read the
	// group's counters first): wait for the removal to land rather than look once.
	var after, groups int
	if err := lab.Poll(10*time.Second, func() error {
		after, groups = ours()
		if after >= before {
			return fmt.Errorf("a confirmed removal left %d of %d flows", after, before)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("our flows: %d with the service, unchanged by the refused reload, %d (groups %d) after the confirmed one", before, after, groups)
}
