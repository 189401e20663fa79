package sample

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCountEstablished(t *testing.T) {
	tests := []struct {
		file  string
		ports []uint16
		want  uint32
	}{
		{"proc_net_tcp", []uint16{18080}, 3},
		{"proc_net_tcp", []uint16{0x8356}, 1}, // one client socket, by its ephemeral port
		{"proc_net_tcp", []uint16{2024}, 0},   // 0x07E8 only listens
		{"proc_net_tcp", nil, 0},
		{"proc_net_tcp", []uint16{18443}, 0},
		{"proc_net_tcp6", []uint16{18443}, 2},
		{"proc_net_tcp6", []uint16{18080, 18443}, 2},
	}
	for _, tt := range tests {
		got, err := CountEstablished(fixture(t, tt.file), NewPortSet(tt.ports...))
		if err != nil {
			t.Fatalf("%s: %v", tt.file, err)
		}
		if got != tt.want {
			t.Errorf("%s ports %v: %d established, want %d", tt.file, tt.ports, got, tt.want)
		}
	}
}

func TestCountEstablishedErrors(t *testing.T) {
	const hdr = "  sl  local_address rem_address   st\n"
	tests := []struct{ name, body, want string }{
		{"no colon after sl", hdr + "   0 0100007F:46A0 00000000:0000 01\n", "line 2"},
		{"no port", hdr + "   0: 0100007F 00000000:0000 01\n", "no 4-digit port"},
		{"bad hex port", hdr + "   0: 0100007F:46G0 00000000:0000 01\n", "bad hex"},
		{"short state", hdr + "   0: 0100007F:46A0 00000000:0000 1\n", "not a socket line"},
		{"truncated", hdr + "   0: 0100007F:46A0\n", "line 2"},
	}
	for _, tt := range tests {
		_, err := CountEstablished([]byte(tt.body), NewPortSet(18080))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestConnsSampler(t *testing.T) {
	files := map[string][]byte{"/tcp": fixture(t, "proc_net_tcp"), "/tcp6": fixture(t, "proc_net_tcp6")}
	c := &Conns{
		Ports: NewPortSet(18080, 18443),
		Tables: []Table{
			{File: "/tcp", Sockstat: "/sockstat", Proto: "TCP"},
			{File: "/tcp6", Sockstat: "/sockstat6", Proto: "TCP6"},
			{File: "/missing"},
			{File: "/tcp7", Sockstat: "/sockstat7", Proto: "TCP7"},
		},
		Read: mapReader(files),
	}
	const sockstat = "sockets: used 51\nTCP: inuse 7 orphan 0 tw 60 alloc 9 mem 0\nUDP: inuse 9 mem 0\n"
	tests := []struct {
		name, sockstat6 string
		want            uint32
	}{
		{"both tables", "TCP6: inuse 5\nUDP6: inuse 0\n", 5},
		// No IPv6 TCP socket at all: the IPv6 table is not read.
		{"tcp6 unused", "TCP6: inuse 0\nUDP6: inuse 0\n", 3},
		// A sockstat without the protocol's line: read the table to be sure.
		{"no tcp6 line", "UDP6: inuse 0\n", 5},
	}
	for _, tt := range tests {
		files["/sockstat"], files["/sockstat6"] = []byte(sockstat), []byte(tt.sockstat6)
		v, err := c.Sample(context.Background())
		if err != nil || !v.Has(FieldConns) || v.Conns != tt.want {
			t.Errorf("%s: got %+v %v, want %d connections", tt.name, v, err, tt.want)
		}
	}
	files["/tcp6"] = []byte("garbage line\n")
	if v, err := c.Sample(context.Background()); err == nil || v.Known != 0 || !strings.Contains(err.Error(), "/tcp6") {
		t.Errorf("garbage: %+v, %v", v, err)
	}
	files["/sockstat6"] = []byte("TCP6: inuse many\n")
	if _, err := c.Sample(context.Background()); err == nil || !strings.Contains(err.Error(), "/sockstat6") {
		t.Errorf("bad sockstat: %v", err)
	}
}

func TestParseSockstatInUse(t *testing.T) {
	tests := []struct {
		data, proto string
		n           uint64
		found       bool
		err         string
	}{
		{"TCP: inuse 2 orphan 0 tw 60 alloc 6 mem 0\n", "TCP", 2, true, ""},
		{"TCP6: inuse 0\n", "TCP6", 0, true, ""},
		{"TCP6: inuse 3\n", "TCP", 0, false, ""}, // prefix is not the protocol
		{"TCP: alloc 3\n", "TCP", 0, true, "no inuse"},
		{"TCP: inuse x\n", "TCP", 0, true, "not a number"},
	}
	for _, tt := range tests {
		n, found, err := ParseSockstatInUse([]byte(tt.data), tt.proto)
		if n != tt.n || found != tt.found || (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("%q %s: %d %v %v", tt.data, tt.proto, n, found, err)
		}
	}
}

func FuzzParseSockstatInUse(f *testing.F) {
	f.Add([]byte("sockets: used 51\nTCP: inuse 2 orphan 0 tw 60 alloc 6 mem 0\n"))
	f.Add([]byte("TCP6: inuse 0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		n, found, err := ParseSockstatInUse(data, "TCP")
		if !found && (n != 0 || err != nil) {
			t.Fatalf("not found but %d %v", n, err)
		}
	})
}

// The default reader, which reuses its buffer, reads the real tables.
func TestConnsReadsProc(t *testing.T) {
	c := &Conns{Ports: NewPortSet(1)}
	for range 2 { // the second sample reuses the buffer
		if _, err := c.Sample(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// readReuse returns whole files, short or longer than one read, and reuses its buffer.
func TestReadReuse(t *testing.T) {
	dir := t.TempDir()
	c := &Conns{}
	for _, size := range []int{0, 100, procShortRead - 1, procShortRead, 4096, minReadBuf, 3*minReadBuf + 7} {
		want := make([]byte, size)
		for i := range want {
			want[i] = byte('a' + i%26)
		}
		name := filepath.Join(dir, "f")
		if err := os.WriteFile(name, want, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := c.readReuse(name)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("size %d: read %d bytes, %v", size, len(got), err)
		}
	}
	if _, err := c.readReuse(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func FuzzCountEstablished(f *testing.F) {
	f.Add(fixture(f, "proc_net_tcp"))
	f.Add(fixture(f, "proc_net_tcp6"))
	f.Add([]byte("   0: 0100007F:46A0 0100007F:835C 01 x\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := CountEstablished(data, NewPortSet(18080, 18443, 0))
		if err == nil && int(n) > strings.Count(string(data), "\n")+1 {
			t.Fatalf("%d connections from %d lines", n, strings.Count(string(data), "\n")+1)
		}
	})
}

// TestCountStatesCloseWait: the in-flight states count a connection its client has closed
// (CLOSE_WAIT, 08) as the kernel's CurrEstab does; ESTABLISHED alone does not.
func TestCountStatesCloseWait(t *testing.T) {
	const tbl = "  sl  local_address rem_address   st\n" +
		"   0: 0100007F:1F90 00000000:0000 0A\n" + // listening
		"   1: 0100007F:1F90 0100007F:835C 01\n" + // established
		"   2: 0100007F:1F90 0100007F:835D 08\n" + // close wait
		"   3: 0100007F:1F90 0100007F:835E 06\n" + // time wait
		"   4: 0100007F:1F90 0100007F:835F 04\n" // fin wait 1
	ports := NewPortSet(8080)
	for _, tc := range []struct {
		states uint32
		want   uint32
	}{{1 << tcpEstablished, 1}, {StatesInFlight, 2}} {
		got, err := CountStates([]byte(tbl), ports, tc.states)
		if err != nil || got != tc.want {
			t.Errorf("states %#x: %d, %v; want %d", tc.states, got, err, tc.want)
		}
	}
}
