package report

import (
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/*.hex from the encoder")

// goldenKey is the example key of docs/push-protocol.md.
var goldenKey = []byte("flowweight-example-key-32-bytes!")

var goldens = []struct {
	file string
	r    Report
}{
	{"golden-v1-healthy.hex", Report{
		BackendID:     "web-1",
		BootNonce:     0x5eed0f1a2b3c4d5e,
		Seq:           42,
		Time:          time.Date(2026, 11, 30, 21, 0, 0, 500_000_000, time.UTC),
		Interval:      5 * time.Second,
		Flags:         FlagHealthOK,
		CPUUtil:       0.375,
		CPUCount:      2.5,
		MemUtil:       0.5,
		MemBytes:      4 << 30,
		Conns:         17,
		NetUtil:       0.01,
		HealthLatency: 1500 * time.Microsecond,
		HealthStatus:  200,
		Version:       Version1,
		Signals:       SignalHealthLatency,
	}},
	{"golden-v1-draining-unhealthy.hex", Report{
		BackendID:     "api-2.dc1",
		BootNonce:     0x0123456789abcdef,
		Seq:           7,
		Time:          time.Date(2026, 11, 30, 21, 0, 5, 0, time.UTC),
		Interval:      2 * time.Second,
		Flags:         FlagDrain,
		CPUUtil:       1,
		CPUCount:      0.25,
		MemUtil:       0.875,
		MemBytes:      256 << 20,
		Conns:         0,
		NetUtil:       0,
		HealthLatency: 2 * time.Second,
		HealthStatus:  503,
		HealthError:   "GET /healthz: 503 Service Unavailable",
		Version:       Version1,
		Signals:       SignalHealthLatency,
	}},
	{"golden-v2-healthy.hex", Report{
		BackendID:     "web-1",
		BootNonce:     0x5eed0f1a2b3c4d5e,
		Seq:           43,
		Time:          time.Date(2026, 11, 30, 21, 0, 5, 500_000_000, time.UTC),
		Interval:      5 * time.Second,
		Flags:         FlagHealthOK,
		CPUUtil:       0.375,
		CPUCount:      2.5,
		MemUtil:       0.5,
		MemBytes:      4 << 30,
		Conns:         17,
		NetUtil:       0.01,
		HealthLatency: 1500 * time.Microsecond,
		HealthStatus:  200,
		Version:       Version2,
		Signals:       SignalCPUPressure | SignalPressureCgroup | SignalThrottled | SignalServiceCPU | SignalHealthLatency,
		CPUPressure:   0.125,
		Throttled:     0.05,
		ServiceCPU:    0.3,
	}},
	{"golden-v2-timeout.hex", Report{
		BackendID:     "api-2.dc1",
		BootNonce:     0x0123456789abcdef,
		Seq:           8,
		Time:          time.Date(2026, 11, 30, 21, 0, 7, 0, time.UTC),
		Interval:      2 * time.Second,
		Flags:         0,
		CPUUtil:       1,
		CPUCount:      0.25,
		MemUtil:       0.875,
		MemBytes:      256 << 20,
		HealthLatency: 2 * time.Second,
		HealthError:   "GET /healthz: timeout",
		Version:       Version2,
		Signals:       SignalCPUPressure,
		CPUPressure:   0.75,
	}},
}

// hexDump renders b as lines of an offset and 16 bytes, the form used in
// docs/push-protocol.md.
func hexDump(b []byte) string {
	var sb strings.Builder
	for off := 0; off < len(b); off += 16 {
		line := b[off:min(off+16, len(b))]
		fmt.Fprintf(&sb, "%04x ", off)
		for _, c := range line {
			fmt.Fprintf(&sb, " %02x", c)
		}
		sb.WriteByte('\n')
	}
	return sb.String()
}

func parseDump(t *testing.T, s string) []byte {
	t.Helper()
	var out []byte
	for i, line := range strings.Split(strings.TrimSpace(s), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			t.Fatalf("dump line %d %q: want an offset and bytes", i+1, line)
		}
		b, err := hex.DecodeString(strings.Join(fields[1:], ""))
		if err != nil {
			t.Fatalf("dump line %d: %v", i+1, err)
		}
		if want := fmt.Sprintf("%04x", len(out)); fields[0] != want {
			t.Fatalf("dump line %d offset %s, want %s", i+1, fields[0], want)
		}
		out = append(out, b...)
	}
	return out
}

// TestGolden checks the golden datagrams both ways: the encoder produces
// them byte for byte, and the decoder turns them back into the reports. It
// also checks that docs/push-protocol.md shows them verbatim.
func TestGolden(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "push-protocol.md"))
	if err != nil {
		t.Fatalf("reading the protocol document: %v", err)
	}
	keyFor := func(string) ([]byte, bool) { return goldenKey, true }
	for _, g := range goldens {
		t.Run(g.file, func(t *testing.T) {
			path := filepath.Join("testdata", g.file)
			enc, err := g.r.AppendSeal(nil, goldenKey)
			if err != nil {
				t.Fatal(err)
			}
			if *update {
				if err := os.WriteFile(path, []byte(hexDump(enc)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			text, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			golden := parseDump(t, string(text))
			if !bytes.Equal(enc, golden) {
				t.Errorf("encoder output differs from %s:\n got\n%s", path, hexDump(enc))
			}
			var got Report
			if err := Open(golden, keyFor, &got); err != nil {
				t.Fatalf("Open(%s): %v", path, err)
			}
			if got != g.r {
				t.Errorf("decoded %s:\n got %+v\nwant %+v", path, got, g.r)
			}
			if !bytes.Contains(doc, text) {
				t.Errorf("docs/push-protocol.md does not contain the dump of %s verbatim:\n%s", path, text)
			}
		})
	}
}
