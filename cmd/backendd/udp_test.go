package main

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestServeUDP(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	s := &Server{Name: "be2"}
	go func() { done <- s.ServeUDP(ctx, pc) }()
	c, err := net.Dial("udp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 64)
	for _, req := range []string{"1", "seq 2"} {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte(req)); err != nil {
			t.Fatal(err)
		}
		n, err := c.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(buf[:n]), "be2 "+req; got != want {
			t.Fatalf("answer %q, want %q", got, want)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeUDP returned %v after its context ended, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ServeUDP did not return after its context ended")
	}
}

func TestParsePorts(t *testing.T) {
	cases := []struct {
		also string
		udp  int
		want []int
		err  string
	}{
		{"", 0, nil, ""},
		{"443", 53, []int{443}, ""},
		{"443, 8443", 0, []int{443, 8443}, ""},
		{"443,x", 0, nil, `-also-ports: "x"`},
		{"0", 0, nil, `-also-ports: "0"`},
		{"", 70000, nil, "-udp-port 70000"},
	}
	for _, c := range cases {
		p, err := parsePorts(c.also, c.udp)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("parsePorts(%q, %d) = %v, want an error with %q", c.also, c.udp, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(p.tcp, c.want) || p.udp != c.udp {
			t.Errorf("parsePorts(%q, %d) = %+v, %v; want %v", c.also, c.udp, p, err, c.want)
		}
	}
}
