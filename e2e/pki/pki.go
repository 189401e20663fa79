// Package pki makes throwaway certificate authorities and certificates for tests of the
// OpenFlow TLS listener: Open vSwitch reads PEM files (ovs-vsctl set-ssl), and so does
// the controller, so everything here is written to files in a directory the test owns.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a self-signed certificate authority.
type CA struct {
	Name     string
	CertFile string // PEM certificate, the file a peer trusts
	cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	dir      string
}

// Leaf is a certificate and its key, as files.
type Leaf struct {
	CertFile, KeyFile string
	Serial            *big.Int
}

// NewCA creates a CA called name, valid for a day, and writes its certificate to dir.
func NewCA(dir, name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := template(name)
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("CA %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	ca := &CA{Name: name, CertFile: filepath.Join(dir, name+".crt"), cert: cert, key: key, dir: dir}
	if err := writePEM(ca.CertFile, "CERTIFICATE", der, 0o644); err != nil {
		return nil, err
	}
	return ca, nil
}

// Issue signs a certificate for name (both client and server use, 127.0.0.1 and
// "localhost" as subject alternative names) and writes NAME.crt and NAME.key (mode 0600).
func (ca *CA) Issue(name string) (*Leaf, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := template(name)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	tmpl.DNSNames, tmpl.IPAddresses = []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("certificate %s from CA %s: %w", name, ca.Name, err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	l := &Leaf{CertFile: filepath.Join(ca.dir, name+".crt"), KeyFile: filepath.Join(ca.dir, name+".key"), Serial: tmpl.SerialNumber}
	if err := writePEM(l.CertFile, "CERTIFICATE", der, 0o644); err != nil {
		return nil, err
	}
	if err := writePEM(l.KeyFile, "PRIVATE KEY", kder, 0o600); err != nil {
		return nil, err
	}
	return l, nil
}

// template is a certificate for name valid from an hour ago for a day, with a random serial.
func template(name string) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name, Organization: []string{"flowweight test"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

// writePEM replaces path atomically, so a reader (a reloading controller) never sees half a file.
func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil { // WriteFile's mode is subject to the umask
		return err
	}
	return os.Rename(tmp, path)
}

// Mutual is what a mutual-TLS test of the OpenFlow listener needs: a CA that signed the
// controller's and a switch's certificates, and a stranger whose certificate another CA
// signed (that CA's certificate is never trusted by anyone).
type Mutual struct {
	CA                           *CA
	Controller, Switch, Stranger *Leaf
}

// NewMutual writes a Mutual set into dir.
func NewMutual(dir string) (*Mutual, error) {
	ca, err := NewCA(dir, "switch-ca")
	if err != nil {
		return nil, err
	}
	other, err := NewCA(dir, "stranger-ca")
	if err != nil {
		return nil, err
	}
	m := &Mutual{CA: ca}
	for _, x := range []struct {
		ca   *CA
		name string
		to   **Leaf
	}{{ca, "controller", &m.Controller}, {ca, "switch", &m.Switch}, {other, "stranger", &m.Stranger}} {
		if *x.to, err = x.ca.Issue(x.name); err != nil {
			return nil, err
		}
	}
	return m, nil
}
