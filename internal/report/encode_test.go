package report

import (
	"bytes"
	"strings"
	"testing"
)

func TestAppendSealKeepsPrefix(t *testing.T) {
	r := sample()
	prefix := []byte("prefix")
	b, err := r.AppendSeal(bytes.Clone(prefix), testKey)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, prefix) {
		t.Fatalf("prefix lost: %q", b[:len(prefix)])
	}
	if !bytes.Equal(b[len(prefix):], seal(t, r)) {
		t.Fatal("sealing after a prefix gave different bytes (tag must cover only the report)")
	}
}

func TestAppendSealShortKey(t *testing.T) {
	r := sample()
	for _, key := range [][]byte{nil, []byte("fifteen-bytes!!")} {
		if _, err := r.AppendSeal(nil, key); err == nil || !strings.Contains(err.Error(), "web-1") {
			t.Errorf("AppendSeal with %d-byte key: err = %v, want an error naming the backend", len(key), err)
		}
	}
}
