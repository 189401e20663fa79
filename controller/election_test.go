package main

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"flowweight/controller/config"
)

// TestElectorRefusesToStartWithoutEtcd: a controller whose etcd cannot be reached, or not
// over the TLS it was told to use, does not start, and the error names what failed.
func TestElectorRefusesToStartWithoutEtcd(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	plain, err := net.Listen("tcp", "127.0.0.1:0") // accepts, speaks no TLS
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	go func() {
		for {
			c, err := plain.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
			c.Close()
		}
	}()
	badCA := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(badCA, []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		ha   config.HA
		want []string
	}{
		{"closed port", config.HA{Etcd: []string{"http://" + closedAddr}}, []string{"ha:", closedAddr}},
		{"tls to a plain server", config.HA{Etcd: []string{"https://" + plain.Addr().String()}}, []string{"ha:", plain.Addr().String()}},
		{"unusable ca", config.HA{Etcd: []string{"https://" + plain.Addr().String()}, TLSCA: badCA}, []string{"ha.tls_ca", "no PEM certificate"}},
		{"missing password file", config.HA{Etcd: []string{"http://" + closedAddr}, Username: "fw", PasswordFile: "/nonexistent/pw"}, []string{"ha.password_file", "/nonexistent/pw"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := config.Default()
			h := c.ha
			h.Name, h.Prefix, h.Lease, h.DialTimeout = "c1", "/fw/t", time.Second, 500*time.Millisecond
			cfg.HA = &h
			e, err := newElector(context.Background(), &cfg, slog.New(slog.DiscardHandler))
			if err == nil {
				e.Close()
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error does not contain %q: %v", w, err)
				}
			}
		})
	}
}
