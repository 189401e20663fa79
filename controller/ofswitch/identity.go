package ofswitch

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net"
	"strings"
)

// peerIdentity is what a datapath id is bound to when the switch presented a TLS
// certificate: its subject and issuer names, which survive the renewal of the certificate
// (and of its key) by the same CA, or, for a certificate without a subject, the SHA-256 of
// its public key. "" without a certificate (plain TCP, or TLS without client certificates).
func peerIdentity(c net.Conn) string {
	leaf := peerLeaf(c)
	if leaf == nil {
		return ""
	}
	if len(leaf.RawSubject) > 0 && leaf.Subject.String() != "" {
		return fmt.Sprintf("subject %q issuer %q", leaf.Subject.String(), leaf.Issuer.String())
	}
	sum := sha256.Sum256(leaf.RawSubjectPublicKeyInfo)
	return "public key sha256:" + hex.EncodeToString(sum[:])
}

func peerLeaf(c net.Conn) *x509.Certificate {
	tc, ok := c.(*tls.Conn)
	if !ok {
		return nil
	}
	if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 {
		return certs[0]
	}
	return nil
}

func describeIdentity(id string) string {
	if id == "" {
		return "none"
	}
	return id
}

// certNamesDatapath reports whether the switch's verified certificate names dpid: the
// subject CN is the id as 16 hex digits, optionally prefixed "dpid:" (how ovs-ofctl prints
// it), or a DNS SAN is the 16 hex digits. Case is ignored.
func certNamesDatapath(c net.Conn, dpid uint64) bool {
	return leafNamesDatapath(peerLeaf(c), dpid)
}

func leafNamesDatapath(leaf *x509.Certificate, dpid uint64) bool {
	if leaf == nil {
		return false
	}
	want := fmt.Sprintf("%016x", dpid)
	cn := strings.ToLower(leaf.Subject.CommonName)
	if cn == want || cn == "dpid:"+want {
		return true
	}
	for _, n := range leaf.DNSNames {
		if strings.EqualFold(n, want) {
			return true
		}
	}
	return false
}
