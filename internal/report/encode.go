package report

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
)

// The encoder: a Report to a sealed datagram, laid out by frame.go's frameOf, the same rule
// the decoder checks datagrams against.

// AppendSeal validates r, appends its encoding to dst and then the
// HMAC-SHA256 tag computed with key over the encoding. On error dst is
// returned unchanged.
func (r *Report) AppendSeal(dst, key []byte) ([]byte, error) {
	if err := r.Validate(); err != nil {
		return dst, err
	}
	if len(key) < MinKeyLen {
		return dst, fmt.Errorf("report: key for backend %q is %d bytes, want >= %d", r.BackendID, len(key), MinKeyLen)
	}
	v := r.Version
	if v == 0 {
		v = Version
	}
	f, ft := frameOf(v, len(r.BackendID), len(r.HealthError))
	if ft.check != checkNone { // Validate refused these already, naming the field
		e := ft.err(nil)
		e.BackendID = r.BackendID
		return dst, e
	}
	start := len(dst)
	dst = slices.Grow(dst, f.size())
	be := binary.BigEndian
	dst = f.appendFraming(dst)
	dst = be.AppendUint16(dst, uint16(r.Flags))
	dst = be.AppendUint64(dst, r.BootNonce)
	dst = be.AppendUint64(dst, r.Seq)
	dst = be.AppendUint64(dst, uint64(r.Time.UnixNano()))
	dst = be.AppendUint64(dst, uint64(r.Interval))
	dst = be.AppendUint32(dst, toUtil(r.CPUUtil))
	dst = be.AppendUint32(dst, uint32(math.Round(r.CPUCount*cpuScale)))
	dst = be.AppendUint32(dst, toUtil(r.MemUtil))
	dst = be.AppendUint32(dst, toUtil(r.NetUtil))
	dst = be.AppendUint64(dst, r.MemBytes)
	dst = be.AppendUint64(dst, uint64(r.HealthLatency))
	dst = be.AppendUint32(dst, r.Conns)
	dst = be.AppendUint16(dst, r.HealthStatus)
	dst = be.AppendUint16(dst, 0)
	if f.extended() {
		dst = be.AppendUint16(dst, uint16(r.Signals))
		dst = be.AppendUint16(dst, 0)
		dst = be.AppendUint32(dst, toUtil(r.CPUPressure))
		dst = be.AppendUint32(dst, toUtil(r.Throttled))
		dst = be.AppendUint32(dst, toUtil(r.ServiceCPU))
	}
	dst = append(dst, r.BackendID...)
	dst = append(dst, r.HealthError...)
	return hmacSHA256(dst, key, dst[start:]), nil
}

func toUtil(v float64) uint32 { return uint32(math.Round(v * utilScale)) }
