package balancer

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"flowweight/controller/config"
	"flowweight/internal/report"
	"flowweight/internal/testutil"
)

// TestHealthProber builds each type from the configuration and runs it against a local
// server, so the address, the port default and override and the payload forms are the ones
// the configuration means.
func TestHealthProber(t *testing.T) {
	tcp := testutil.TCPServer(t, func(c net.Conn) { c.Write([]byte("HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")) })
	udp := testutil.UDPResponder(t, func(b []byte) []byte {
		if bytes.Equal(b, []byte{0, 1, 0xff}) {
			return []byte("\x00ok\xfe")
		}
		return nil
	})
	_, tcpPort, _ := net.SplitHostPort(tcp)
	_, udpPort, _ := net.SplitHostPort(udp)
	// Backend "b" at 127.0.0.1, its service port the TCP listener's, polled over SNMP.
	backend := func(extra string) string {
		keys, tables := "", extra
		if strings.HasPrefix(extra, "  health_url") {
			keys, tables = extra, ""
		}
		return testutil.Edit(webConfig, `ip = "10.0.0.2"`, `ip = "127.0.0.1"`) + "  port = " + tcpPort + "\n" +
			"  source = \"snmp\"\n" + keys + "  [service.backend.snmp]\n  version = \"v2c\"\n  community = \"c\"\n" + tables
	}
	cases := []struct {
		name, toml string
		ok         bool
		err        string
	}{
		{"tcp on the service port", backend("  [service.backend.health]\n  type = \"tcp\"\n"), true, ""},
		{"http on the service port", backend("  [service.backend.health]\n  type = \"http\"\n  expect_status = \"204\"\n"), true, ""},
		{"http default statuses", backend("  [service.backend.health]\n  type = \"http\"\n"), true, ""},
		{"health_url", backend("  health_url = \"http://127.0.0.1:" + tcpPort + "/\"\n"), true, ""},
		{"udp hex on its port", backend("  [service.backend.health]\n  type = \"udp\"\n  port = " + udpPort +
			"\n  send_hex = \"00 01 ff\"\n  expect_hex = \"6f6b\"\n"), true, ""},
		{"udp text, wrong answer awaited", backend("  [service.backend.health]\n  type = \"udp\"\n  port = " + udpPort +
			"\n  send = \"\\u0000\\u0001\"\n  expect = \"ok\"\n"), false, "udp 127.0.0.1:" + udpPort + ": no answer"},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			c, err := config.Parse("t.toml", []byte(tt.toml))
			if err != nil {
				t.Fatal(err)
			}
			chk, err := healthProber(&c.Services[0].Backends[1], 300*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			r := chk.Check(context.Background())
			if r.OK != tt.ok || !strings.Contains(r.Err, tt.err) {
				t.Errorf("got %+v, want ok=%v err~%q", r, tt.ok, tt.err)
			}
		})
	}
}

// TestSNMPTarget: the poller's target is the [snmp] table with the host's service ports, or
// the backend's own port when the wiring names none.
func TestSNMPTarget(t *testing.T) {
	c, err := config.Parse("t.toml", []byte(webConfig+"  port = 8080\n  source = \"snmp\"\n  health_url = \"http://10.0.0.2/\"\n"+
		"  [service.backend.snmp]\n  version = \"v2c\"\n  community = \"c\"\n  retries = 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	be := &c.Services[0].Backends[1]
	for _, tt := range []struct {
		name  string
		ports []uint16
		want  []uint16
	}{
		{"no ports: the backend's", nil, []uint16{8080}},
		{"the host's ports", []uint16{8080, 443}, []uint16{8080, 443}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tg := snmpTarget(be, tt.ports)
			if !slices.Equal(tg.ServicePorts, tt.want) || tg.Address != "10.0.0.2:161" || tg.Community != "c" || tg.Retries != 3 {
				t.Fatalf("target %+v, want ports %v of 10.0.0.2:161 community c retries 3", tg, tt.want)
			}
			if err := tg.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestProbeKey(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	secret := write("secret", "a-controller-secret-of-32-bytes!\n")
	own := write("own", "this-backend-has-its-own-key\n")
	shared := write("shared", "one-key-for-every-probe-000\n")
	derived := func(id string) string {
		k, err := report.DeriveKey([]byte("a-controller-secret-of-32-bytes!"), id)
		if err != nil {
			t.Fatal(err)
		}
		return string(k)
	}
	tests := []struct {
		name, collector string
		backend         config.Backend
		want, err       string
	}{
		{"derived", `secret_file = "` + secret + `"`, config.Backend{Name: "a"}, derived("a"), ""},
		{"derived differs per backend", `secret_file = "` + secret + `"`, config.Backend{Name: "b"}, derived("b"), ""},
		{"own key wins", `secret_file = "` + secret + `"`, config.Backend{Name: "a", KeyFile: own}, "this-backend-has-its-own-key", ""},
		{"shared", `key_file = "` + shared + `"`, config.Backend{Name: "a"}, "one-key-for-every-probe-000", ""},
		{"secret missing", `secret_file = "` + filepath.Join(dir, "nope") + `"`, config.Backend{Name: "a"}, "", "collector.secret_file: key file " + filepath.Join(dir, "nope")},
		{"own key missing", `secret_file = "` + secret + `"`, config.Backend{Name: "a", KeyFile: filepath.Join(dir, "nope")}, "", "key_file: key file " + filepath.Join(dir, "nope")},
		{"shared key missing", `key_file = "` + filepath.Join(dir, "nope") + `"`, config.Backend{Name: "a"}, "", "collector.key_file: key file " + filepath.Join(dir, "nope")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := config.Parse("t.toml", []byte(testutil.Edit(webConfig, `key_file = "KEY"`, tt.collector)))
			if err != nil {
				t.Fatal(err)
			}
			k, err := ProbeKey(c, &tt.backend, report.LoadKey)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("err %v, want one saying %q", err, tt.err)
				}
				return
			}
			if err != nil || string(k) != tt.want {
				t.Fatalf("key %q, %v; want %q", k, err, tt.want)
			}
		})
	}
}
