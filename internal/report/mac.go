package report

import (
	"crypto/sha256"
	"crypto/subtle"
	"hash"
	"sync"
)

// macState holds a SHA-256 digest and scratch space for one HMAC
// computation. crypto/hmac.New allocates two digests and two pads per call;
// the collector verifies every datagram with a different backend's key, so
// instead we run RFC 2104 over a pooled digest and allocate nothing.
type macState struct {
	h      hash.Hash
	pad    [sha256.BlockSize]byte
	sum    [sha256.Size]byte
	tagOut [sha256.Size]byte
}

var macPool = sync.Pool{New: func() any { return &macState{h: sha256.New()} }}

// verifyMAC reports in constant time whether tag is HMAC-SHA256(key, msg).
// The expected tag is computed into pooled memory, so verifying allocates
// nothing (a stack array handed to hash.Hash.Sum would escape).
func verifyMAC(key, msg, tag []byte) bool {
	m := macPool.Get().(*macState)
	defer macPool.Put(m)
	want := m.hmac(m.tagOut[:0], key, msg)
	ok := subtle.ConstantTimeCompare(want, tag) == 1
	clear(m.tagOut[:])
	return ok
}

// hmacSHA256 appends HMAC-SHA256(key, msg) to dst (RFC 2104, identical to
// crypto/hmac with sha256.New, which a test checks).
func hmacSHA256(dst, key, msg []byte) []byte {
	m := macPool.Get().(*macState)
	defer macPool.Put(m)
	return m.hmac(dst, key, msg)
}

func (m *macState) hmac(dst, key, msg []byte) []byte {
	h := m.h
	if len(key) > sha256.BlockSize {
		h.Reset()
		h.Write(key)
		key = h.Sum(m.sum[:0])
	}
	copy(m.pad[:], key)
	for i := range m.pad {
		m.pad[i] ^= 0x36
	}
	h.Reset()
	h.Write(m.pad[:])
	h.Write(msg)
	inner := h.Sum(m.sum[:0])
	for i := range m.pad {
		m.pad[i] ^= 0x36 ^ 0x5c
	}
	h.Reset()
	h.Write(m.pad[:])
	h.Write(inner)
	dst = h.Sum(dst)
	// Leave no key material in pooled memory.
	clear(m.pad[:])
	clear(m.sum[:])
	h.Reset()
	return dst
}
