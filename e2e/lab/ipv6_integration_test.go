//go:build integration

package lab_test

import (
	"context"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"flowweight/e2e/lab"
)

// TestIPv6Hosts: two IPv6 hosts on a standalone bridge (NORMAL) can talk TCP at once: their
// addresses are not tentative (DAD is off), and neighbour discovery between them works
// through the switch.
func TestIPv6Hosts(t *testing.T) {
	l := lab.ForTest(t)
	o, err := l.StartOVS()
	if err != nil {
		t.Fatal(err)
	}
	br, err := o.AddBridge("br6", "", "standalone")
	if err != nil {
		t.Fatal(err)
	}
	a, err := br.AddHost("a6", netip.MustParsePrefix("fd00:77:0:99::a/64"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := br.AddHost("b6", netip.MustParsePrefix("fd00:77:0:99::b/64"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, h := range []*lab.Host{a, b} {
		out, err := h.Run(ctx, "ip", "-6", "addr", "show", "dev", lab.HostIface)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, h.Addr().String()+"/64") || strings.Contains(out, "tentative") {
			t.Fatalf("host %s addresses right after AddHost:\n%s", h.Name, out)
		}
	}
	ln, err := b.Listen("tcp", "[fd00:77:0:99::b]:8080")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_, _ = c.Write([]byte("hello"))
			c.Close()
		}
	}()
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := a.DialContext(dctx, "tcp", net.JoinHostPort(b.Addr().String(), "8080"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "hello" {
		t.Fatalf("read %q, %v", got, err)
	}
	if _, err := a.Ping(ctx, b.Addr(), 1, time.Second); err == nil || !strings.Contains(err.Error(), "ICMPv4 echo only") {
		t.Fatalf("Ping over IPv6: err %v, want the IPv4-only refusal", err)
	}
}
