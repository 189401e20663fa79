//go:build integration

package ofswitch

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"flowweight/e2e/pki"

	"github.com/netrack/openflow/ofp"
)

// TestOVSSessionTLS runs OpenFlow over mutual TLS with a real Open vSwitch (ovs-vsctl
// set-ssl, controller target ssl:): a switch whose certificate another CA signed is refused
// during the handshake, and the same switch with a certificate from the configured CA
// connects and takes a group rewrite confirmed by a barrier.
func TestOVSSessionTLS(t *testing.T) {
	m, err := pki.NewMutual(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ca, ctl, good, stranger := m.CA, m.Controller, m.Switch, m.Stranger
	pair, err := tls.LoadX509KeyPair(ctl.CertFile, ctl.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(ca.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	tc := &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}

	h := newRecHandler()
	srv, port := serverOnFreePort(t, h, Config{TLS: tc})
	// The switch trusts our CA (it verifies the controller) but presents the stranger's
	// certificate, which the controller must refuse.
	lab := startOVSLabTarget(t, fmt.Sprintf("ssl:127.0.0.1:%d", port),
		"set-ssl", stranger.KeyFile, stranger.CertFile, ca.CertFile)
	deadline := time.Now().Add(ovsConnect)
	for srv.Stats().HandshakeFailure == 0 && time.Now().Before(deadline) {
		select {
		case ev := <-h.events:
			t.Fatalf("switch with a stranger's certificate: handler got %s", ev.kind)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if srv.Stats().HandshakeFailure == 0 {
		t.Fatalf("no refused handshake within %v", ovsConnect)
	}
	if n := srv.Stats().Switches; n != 0 {
		t.Fatalf("%d switches registered after a refused certificate", n)
	}
	t.Logf("stranger's certificate refused (%d handshake failures)", srv.Stats().HandshakeFailure)

	start := time.Now()
	lab.vsctl("set-ssl", good.KeyFile, good.CertFile, ca.CertFile)
	sw := h.waitFor(t, "connected", ovsConnect).sw
	t.Logf("switch with the CA's certificate connected %v after set-ssl", time.Since(start))
	if sw.DatapathID() != lab.dpid {
		t.Fatalf("DatapathID %016x, want %016x", sw.DatapathID(), lab.dpid)
	}
	res, err := sw.Apply(context.Background(), []Message{selectGroup(ofp.GroupAdd, 3, []uint16{5, 7})})
	if err != nil {
		t.Fatalf("Apply over TLS: %v", err)
	}
	t.Logf("barrier RTT over TLS for a 2-bucket ADD: %v", res.BarrierRTT[0])
	groups := lab.ofctl("dump-groups")
	for _, w := range []string{"group_id=3,type=select", "weight:5,actions=output:1", "weight:7,actions=output:2"} {
		if !strings.Contains(groups, w) {
			t.Errorf("dump-groups lacks %q:\n%s", w, groups)
		}
	}
	// Open vSwitch's own view: the controller connection is up and it is the ssl: target.
	// ovs-vswitchd refreshes that column every few seconds, so it is polled.
	want := []string{fmt.Sprintf("ssl:127.0.0.1:%d", port), "true"}
	var status []string
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if status = strings.Fields(lab.vsctl("--bare", "--columns=target,is_connected", "list", "controller")); slices.Equal(status, want) {
			break
		}
	}
	if !slices.Equal(status, want) {
		t.Errorf("ovs-vsctl list controller: target and is_connected %q, want %q", status, want)
	}
}

// TestOVSCertNamesDatapath: with CertNamesDatapath, a real Open vSwitch whose certificate
// the CA signed but which does not name its datapath id is refused after the handshake, and
// the same switch connects once its certificate's CN is its datapath id as 16 hex digits (the
// form ovs-vsctl shows in the bridge's datapath_id column).
func TestOVSCertNamesDatapath(t *testing.T) {
	m, err := pki.NewMutual(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(m.Controller.CertFile, m.Controller.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(m.CA.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	tc := &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	h := newRecHandler()
	srv, port := serverOnFreePort(t, h, Config{TLS: tc, CertNamesDatapath: true})
	lab := startOVSLabTarget(t, fmt.Sprintf("ssl:127.0.0.1:%d", port),
		"set-ssl", m.Switch.KeyFile, m.Switch.CertFile, m.CA.CertFile)
	deadline := time.Now().Add(ovsConnect)
	for srv.Stats().Faults[FaultIdentityMismatch] == 0 && time.Now().Before(deadline) {
		select {
		case ev := <-h.events:
			t.Fatalf("switch whose certificate does not name its datapath: handler got %s", ev.kind)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if srv.Stats().Faults[FaultIdentityMismatch] == 0 {
		t.Fatalf("no identity_mismatch within %v (faults %v)", ovsConnect, srv.Stats().Faults)
	}
	dpidCol := strings.Trim(strings.TrimSpace(lab.vsctl("get", "bridge", lab.bridge, "datapath_id")), `"`)
	if want := fmt.Sprintf("%016x", lab.dpid); dpidCol != want {
		t.Fatalf("bridge datapath_id %q, want %q", dpidCol, want)
	}
	leaf, err := m.CA.Issue(dpidCol)
	if err != nil {
		t.Fatal(err)
	}
	lab.vsctl("set-ssl", leaf.KeyFile, leaf.CertFile, m.CA.CertFile)
	sw := h.waitFor(t, "connected", ovsConnect).sw
	if sw.DatapathID() != lab.dpid {
		t.Fatalf("DatapathID %016x, want %016x", sw.DatapathID(), lab.dpid)
	}
	if _, err := sw.Apply(context.Background(), []Message{selectGroup(ofp.GroupAdd, 4, []uint16{1, 1})}); err != nil {
		t.Fatalf("Apply over TLS with a certificate naming the datapath: %v", err)
	}
}
