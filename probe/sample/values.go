package sample

import (
	"context"
	"errors"
	"os"
	"time"
)

// Field is a bit naming one measured quantity in Values.
type Field uint8

// The measured quantities.
const (
	FieldCPUUtil Field = 1 << iota
	FieldCPUCount
	FieldMemUtil
	FieldMemBytes
	FieldConns
	FieldNetUtil
)

// Values is one sample. A field is meaningful only when its bit is set in Known: a sampler that
// failed, or that needs a second reading to compute a rate, leaves its bits clear, and the
// collector then treats the quantity as unknown rather than as zero load.
type Values struct {
	Known    Field
	CPUUtil  float64 // fraction of CPUCount busy over the last period, in [0,1]
	CPUCount float64 // logical CPUs available (a cgroup quota gives fractions)
	MemUtil  float64 // fraction of MemBytes in use, in [0,1]
	MemBytes uint64  // memory available to the backend, bytes
	Conns    uint32  // established TCP connections on the service ports
	NetUtil  float64 // NIC throughput as a fraction of line rate, in [0,1]
}

// Has reports whether every field in f is known.
func (v Values) Has(f Field) bool { return v.Known&f == f }

// Merge copies into v the fields that o knows.
func (v *Values) Merge(o Values) {
	if o.Has(FieldCPUUtil) {
		v.CPUUtil = o.CPUUtil
	}
	if o.Has(FieldCPUCount) {
		v.CPUCount = o.CPUCount
	}
	if o.Has(FieldMemUtil) {
		v.MemUtil = o.MemUtil
	}
	if o.Has(FieldMemBytes) {
		v.MemBytes = o.MemBytes
	}
	if o.Has(FieldConns) {
		v.Conns = o.Conns
	}
	if o.Has(FieldNetUtil) {
		v.NetUtil = o.NetUtil
	}
	v.Known |= o.Known
}

// Sampler measures some of the fields of Values. It returns the fields it could measure even
// when it also returns an error about others.
type Sampler interface {
	Sample(ctx context.Context) (Values, error)
}

// ErrFirstSample is returned by rate samplers on their first call: a rate needs two readings.
var ErrFirstSample = errors.New("first reading, no rate yet")

// ReadFileFunc reads a whole file; os.ReadFile in production, a map in tests.
type ReadFileFunc func(name string) ([]byte, error)

// Clock gives the time for rate computations.
type Clock func() time.Time

func orRead(f ReadFileFunc) ReadFileFunc {
	if f == nil {
		return os.ReadFile
	}
	return f
}

func orClock(c Clock) Clock {
	if c == nil {
		return time.Now
	}
	return c
}

func clamp01(x float64) float64 {
	switch {
	case x < 0 || x != x:
		return 0
	case x > 1:
		return 1
	}
	return x
}
