package state

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func sample() *File {
	removed := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	return &File{Version: Version, Written: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC),
		Backends: map[string]Backend{
			"web1": {Service: "web", OperatorDrain: true, LearnedCapacity: 1.25},
			"web2": {Service: "web", LearnedCapacity: 0.8},
			"web4": {Service: "web", OperatorDrain: true, Removed: &removed},
			"fws1": {Service: "web", LearnedCapacity: 1.5, Also: map[string]float64{"dns": 0.9}},
		},
		Replay:  map[string]json.RawMessage{"web1": json.RawMessage(`{"epoch":7,"seq":1234}`)},
		Weights: map[string]map[string]uint16{"web": {"web1": 250, "web2": 750}},
	}
}

func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "controller.state")
	want := sample()
	if err := Save(path, want); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("saved file: %v %v", fi, err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "none")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

// TestDocumentedExample decodes the example printed in docs/operations.md, so it cannot rot.
func TestDocumentedExample(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "<!-- state-example -->\n```json\n")
	example, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/operations.md has no state file example marked <!-- state-example -->")
	}
	if _, err := Decode([]byte(example)); err != nil {
		t.Fatalf("the documented example does not decode: %v", err)
	}
}

func TestDecodeRejects(t *testing.T) {
	cases := []struct{ name, data, want string }{
		{"empty", ``, "EOF"},
		{"truncated", `{"version":1,"backends":{"web1":{"service":"web"`, "unexpected EOF"},
		{"no version", `{"backends":{}}`, "version: missing"},
		{"newer", `{"version":2}`, "newer controller"},
		{"negative version", `{"version":-1}`, "version: -1"},
		{"unknown field", `{"version":1,"drains":[]}`, "unknown field"},
		{"trailing data", `{"version":1} {}`, "data after"},
		{"bad name", `{"version":1,"backends":{"a b":{"service":"web"}}}`, "not a backend name"},
		{"no service", `{"version":1,"backends":{"a":{}}}`, "service"},
		{"learned out of range", `{"version":1,"backends":{"a":{"service":"web","learned_capacity":1e9}}}`, "learned_capacity"},
		{"learned negative", `{"version":1,"backends":{"a":{"service":"web","learned_capacity":-1}}}`, "learned_capacity"},
		{"zero removed", `{"version":1,"backends":{"a":{"service":"web","removed":"0001-01-01T00:00:00Z"}}}`, "removed"},
		{"also bad service", `{"version":1,"backends":{"a":{"service":"web","also_learned":{"a b":1}}}}`, "also_learned"},
		{"also is service", `{"version":1,"backends":{"a":{"service":"web","also_learned":{"web":1}}}}`, "also_learned"},
		{"also out of range", `{"version":1,"backends":{"a":{"service":"web","also_learned":{"dns":0}}}}`, "also_learned"},
		{"bad replay name", `{"version":1,"replay":{"../x":{}}}`, "replay"},
		{"bad replay json", `{"version":1,"replay":{"a":{]}}`, "invalid"},
		{"wrong type", `{"version":"1"}`, "cannot unmarshal"},
		{"weights bad service", `{"version":1,"weights":{"a b":{"web1":1}}}`, `weights "a b": not a service name`},
		{"weights bad backend", `{"version":1,"weights":{"web":{"../x":1}}}`, `weights "web" "../x": not a backend name`},
		{"weights out of range", `{"version":1,"weights":{"web":{"web1":70000}}}`, "cannot unmarshal"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.data))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode(%s) = %v, want an error containing %q", tc.data, err, tc.want)
			}
		})
	}
}

func TestLoadCorruptAndQuarantine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "controller.state")
	if err := os.WriteFile(path, []byte(`{"version":1,"backends":{"web1":`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Path != path || !strings.Contains(err.Error(), path) {
		t.Fatalf("corrupt file: %v", err)
	}
	aside, err := Quarantine(path)
	if err != nil || aside != path+".corrupt" {
		t.Fatal(aside, err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("the corrupt file is still in place")
	}
	if data, err := os.ReadFile(aside); err != nil || !strings.HasPrefix(string(data), `{"version":1`) {
		t.Fatalf("kept aside: %q %v", data, err)
	}
}

// TestFailedWriteKeepsOldFile makes the write fail half-way: the old file stays whole and no
// temporary file is left behind.
func TestFailedWriteKeepsOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "controller.state")
	old := sample()
	if err := Save(path, old); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	boom := errors.New("disk full")
	err := writeAtomic(path, []byte(`{"version":1,"backends":{}}`), 0o600, func(f *os.File, b []byte) error {
		f.Write(b[:len(b)/2])
		return boom
	})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), path) {
		t.Fatalf("failed write: %v", err)
	}
	after, _ := os.ReadFile(path)
	if string(after) != string(before) {
		t.Fatal("a failed write changed the file")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("left behind: %v", entries)
	}
	// A directory that does not exist fails cleanly too.
	if err := WriteFileAtomic(filepath.Join(dir, "no", "such"), []byte("x"), 0o600); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
}

func TestEncodeRefusesInvalid(t *testing.T) {
	if _, err := Encode(&File{Version: Version, Backends: map[string]Backend{"a": {Service: ""}}}); err == nil {
		t.Fatal("encoded an invalid file")
	}
}

func TestPrune(t *testing.T) {
	now := time.Unix(2e9, 0)
	at := func(ago time.Duration) *time.Time { t := now.Add(-ago); return &t }
	m := map[string]Backend{
		"live":    {Service: "s"},
		"recent":  {Service: "s", OperatorDrain: true, Removed: at(time.Hour)},
		"older":   {Service: "s", OperatorDrain: true, Removed: at(2 * time.Hour)},
		"ancient": {Service: "s", OperatorDrain: true, Removed: at(30 * 24 * time.Hour)},
	}
	Prune(m, now, 7*24*time.Hour, 1)
	if len(m) != 2 || m["live"].Service == "" || m["recent"].Service == "" {
		t.Fatalf("pruned to %v", m)
	}
}

func FuzzDecode(f *testing.F) {
	good, _ := Encode(sample())
	f.Add(good)
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{"version":1,"backends":{"a":{"service":"b","removed":"2026-01-01T00:00:00Z"}}}`))
	f.Add([]byte(`{"version":1,"weights":{"web":{"a":1,"b":0}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := Decode(data)
		if err != nil {
			return
		}
		enc, err := Encode(a)
		if err != nil {
			t.Fatalf("decoded but does not encode: %v", err)
		}
		b, err := Decode(enc)
		if err != nil {
			t.Fatalf("re-decode: %v\n%s", err, enc)
		}
		enc2, _ := Encode(b)
		if string(enc) != string(enc2) {
			t.Fatalf("not stable:\n%s\n%s", enc, enc2)
		}
	})
}

// TestLearnPerService: a host in several services keeps each service's learned capacity,
// and a file written before hosts (one service per name) reads as before.
func TestLearnPerService(t *testing.T) {
	var e Backend
	for _, l := range []struct {
		svc string
		l   float64
	}{{"web", 1.5}, {"tls", 0}, {"dns", 0.9}, {"web", 1.25}} {
		e.Learn(l.svc, l.l)
	}
	for svc, want := range map[string]float64{"web": 1.25, "tls": 0, "dns": 0.9, "none": 0} {
		if got := e.LearnedIn(svc); got != want {
			t.Errorf("LearnedIn(%q) = %v, want %v (entry %+v)", svc, got, want, e)
		}
	}
	old, err := Decode([]byte(`{"version":1,"backends":{"web1":{"service":"web","learned_capacity":1.5}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := old.Backends["web1"].LearnedIn("web"); got != 1.5 {
		t.Fatalf("old file: LearnedIn(web) = %v, want 1.5", got)
	}
}
