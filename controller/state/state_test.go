package state

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
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
		// Decoded exactly as documented: encoding/json alone matches names in any case and
		// lets the last repeated key win, so this one was applied as drained (jq: not).
		{"capitalised beside", `{"version":1,"backends":{"a":{"service":"web","operator_drain":false,"OPERATOR_DRAIN":true}}}`, `$.backends.a: unknown field "OPERATOR_DRAIN"`},
		{"capitalised alone", `{"version":1,"backends":{"a":{"Service":"web"}}}`, `unknown field "Service"`},
		{"capitalised top", `{"Version":1}`, `$: unknown field "Version"`},
		{"repeated top", `{"version":1,"version":1}`, "$: key version appears twice"},
		{"repeated field", `{"version":1,"backends":{"a":{"service":"web","operator_drain":true,"operator_drain":false}}}`, "$.backends.a: key operator_drain appears twice"},
		{"repeated backend", `{"version":1,"backends":{"a":{"service":"web"},"a":{"service":"web","operator_drain":true}}}`, "$.backends: key a appears twice"},
		{"repeated also", `{"version":1,"backends":{"a":{"service":"web","also_learned":{"dns":1,"dns":2}}}}`, "also_learned: key dns appears twice"},
		{"repeated in replay", `{"version":1,"replay":{"a":{"epoch":1,"epoch":2}}}`, "$.replay.a: key epoch appears twice"},
		{"unknown nested", `{"version":1,"backends":{"a":{"service":"web","drained":true}}}`, `unknown field "drained"`},
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
	f.Add([]byte(`{"version":1,"backends":{"a":{"service":"web","operator_drain":false,"OPERATOR_DRAIN":true}}}`))
	f.Add([]byte(`{"version":1,"backends":{"a":{"service":"web","operator_drain":true,"operator_drain":false}}}`))
	f.Add([]byte(`{"version":1,"replay":{"a":{"epoch":1,"epoch":2}}}`))
	f.Add([]byte(`{"version":1,"weights":{"web":{"a":1,"b":0}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := Decode(data)
		if err != nil {
			return
		}
		agreesWithGeneric(t, data, a)
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

// TestLoadRefusesUnsafeFile: the state file gets the checks of a key file, and its
// directory's: a 0666 file in a 0777 directory used to load silently. Each refusal is a
// CorruptError naming the path and the fault; a FIFO is refused without blocking.
func TestLoadRefusesUnsafeFile(t *testing.T) {
	good, err := Encode(sample())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name            string
		fileMode        os.FileMode
		dirMode         os.FileMode // with os.ModeSticky where wanted
		fifo            bool
		uid             int // -1: as created
		want            string
		needRootToChown bool
	}{
		{"private", 0o600, 0o700, false, -1, "", false},
		{"group readable", 0o640, 0o750, false, -1, "", false},
		{"sticky shared directory", 0o600, 0o777 | os.ModeSticky, false, -1, "", false},
		{"world readable and writable", 0o666, 0o700, false, -1, "readable by others (mode 0666)", false},
		{"group writable", 0o620, 0o700, false, -1, "writable by group or others (mode 0620)", false},
		{"0666 in 0777", 0o666, 0o777, false, -1, "readable by others", false},
		{"private in 0777", 0o600, 0o777, false, -1, "writable by group or others (mode 0777)", false},
		{"private in group-writable", 0o600, 0o770, false, -1, "writable by group or others (mode 0770)", false},
		{"a FIFO", 0o600, 0o700, true, -1, "named pipe", false},
		{"another user's", 0o600, 0o700, false, 4242, "owned by uid 4242", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.needRootToChown && os.Geteuid() != 0 {
				t.Skip("chown to another user needs root")
			}
			dir := filepath.Join(t.TempDir(), "state")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "controller.state")
			if tc.fifo {
				if err := syscall.Mkfifo(path, 0o600); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(path, good, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tc.fileMode); err != nil {
				t.Fatal(err)
			}
			if tc.uid >= 0 {
				if err := os.Chown(path, tc.uid, -1); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Chmod(dir, tc.dirMode); err != nil {
				t.Fatal(err)
			}
			f, err := Load(path)
			if tc.want == "" {
				if err != nil || f == nil {
					t.Fatalf("Load = %v", err)
				}
				return
			}
			var ce *CorruptError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Load: err = %v, want a CorruptError naming %s and saying %q", err, path, tc.want)
			}
		})
	}
}

// agreesWithGeneric: what Decode applied is what any other JSON reader (jq, a generic map)
// reads from the same bytes: the drain and learned capacity of every backend.
func agreesWithGeneric(t *testing.T, data []byte, f *File) {
	t.Helper()
	var g struct {
		Backends map[string]map[string]any `json:"backends"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatalf("accepted, but a generic reader fails: %v", err)
	}
	if len(g.Backends) != len(f.Backends) {
		t.Fatalf("%d backends, a generic reader sees %d", len(f.Backends), len(g.Backends))
	}
	for name, m := range g.Backends {
		for k := range m {
			switch k {
			case "service", "operator_drain", "learned_capacity", "also_learned", "removed":
			default:
				t.Fatalf("backend %q: accepted with key %q", name, k)
			}
		}
		drain, _ := m["operator_drain"].(bool)
		learned, _ := m["learned_capacity"].(float64)
		if b := f.Backends[name]; b.OperatorDrain != drain || b.LearnedCapacity != learned {
			t.Fatalf("backend %q: applied drain %v learned %v; a generic reader sees %v %v", name, b.OperatorDrain, b.LearnedCapacity, drain, learned)
		}
	}
}

// TestDropLearnedOutside: learned capacity beyond what learning reaches is removed, each one
// named; the rest of the entry and of the file is kept.
func TestDropLearnedOutside(t *testing.T) {
	f := &File{Version: Version, Backends: map[string]Backend{
		"a": {Service: "web", LearnedCapacity: 1000, OperatorDrain: true},
		"b": {Service: "web", LearnedCapacity: 8},
		"c": {Service: "web", LearnedCapacity: 0.125, Also: map[string]float64{"dns": 0.01, "ntp": 2}},
		"d": {Service: "web", LearnedCapacity: 0.1, Also: map[string]float64{"dns": 9}},
	}}
	errs := f.DropLearnedOutside(8)
	if len(errs) != 4 {
		t.Fatalf("errors %v, want 4", errs)
	}
	for i, w := range []string{`"a": learned capacity 1000 in service "web" outside [0.125,8]`, `"c": learned capacity 0.01 in service "dns"`,
		`"d": learned capacity 0.1 in service "web"`, `"d": learned capacity 9 in service "dns"`} {
		if !strings.Contains(errs[i].Error(), w) {
			t.Errorf("error %d = %v, want %q", i, errs[i], w)
		}
	}
	want := map[string]Backend{
		"a": {Service: "web", OperatorDrain: true},
		"b": {Service: "web", LearnedCapacity: 8},
		"c": {Service: "web", LearnedCapacity: 0.125, Also: map[string]float64{"ntp": 2}},
		"d": {Service: "web"},
	}
	if !reflect.DeepEqual(f.Backends, want) {
		t.Fatalf("kept %+v\nwant %+v", f.Backends, want)
	}
}
