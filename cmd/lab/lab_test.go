package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseState(t *testing.T) {
	good := newState("ab12", "/var/tmp/fwlab.Xy12Ab", 4242, ProxyAddr, "", time.Date(2026, 11, 30, 22, 0, 0, 0, time.UTC))
	encode := func(st State) string {
		b, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	with := func(f func(*State)) string {
		st := good
		f(&st)
		return encode(st)
	}
	tests := []struct {
		name    string
		in      string
		wantErr string // "" = must parse
	}{
		{"written by up", encode(good), ""},
		{"pid 0", with(func(s *State) { s.PID = 0 }), "pid 0"},
		{"pid 1 is init, never ours", with(func(s *State) { s.PID = 1 }), "pid 1"},
		{"id too long", with(func(s *State) { s.ID = "abcdefg"; s.Prefix = "fwabcdefg" }), `id "abcdefg"`},
		{"id with a slash", with(func(s *State) { s.ID = "a/b"; s.Prefix = "fwa/b" }), `id "a/b"`},
		{"prefix not fw+id: sweep would hit another lab", with(func(s *State) { s.Prefix = "fw" }), `prefix "fw"`},
		{"relative dir", with(func(s *State) { s.Dir = "fwlab.x" }), `dir "fwlab.x"`},
		{"dir not made by up: down removes it", with(func(s *State) { s.Dir = "/var/tmp" }), `dir "/var/tmp"`},
		{"dir escaping by ..", with(func(s *State) { s.Dir = "/var/tmp/fwlab.x/.." }), `dir "/var/tmp/fwlab.x/.."`},
		{"unknown field", `{"pid":5,"id":"a","prefix":"fwa","dir":"/x/fwlab.1","extra":1}`, "unknown field"},
		{"not JSON", "pid=5", "state:"},
		{"empty", "", "state:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := ParseState([]byte(tt.in))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("ParseState: %v", err)
				}
				if st.Prefix != "fw"+st.ID || st.Mgmt != st.Dir+"/ovs/"+st.Prefix+"-br.mgmt" {
					t.Errorf("parsed %+v: names not derived from id and dir", st)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ParseState error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func FuzzParseState(f *testing.F) {
	good, _ := json.Marshal(newState("ab12", "/var/tmp/fwlab.Xy12Ab", 4242, ProxyAddr, "", time.Unix(0, 0).UTC()))
	f.Add(good)
	f.Add([]byte(`{"pid":5,"id":"a","prefix":"fwa","dir":"/x/fwlab.1"}`))
	f.Add([]byte(`{"pid":-1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := ParseState(data)
		if err != nil {
			return
		}
		// Whatever parses is safe to act on: a real PID, a lab prefix, a directory of up's.
		if st.PID <= 1 || !strings.HasPrefix(st.Prefix, "fw") || len(st.Prefix) < 3 || st.Prefix != "fw"+st.ID {
			t.Fatalf("accepted unsafe state %+v", st)
		}
		if checkLabDir(st.Dir) != nil {
			t.Fatalf("accepted dir %q", st.Dir)
		}
	})
}

func TestIsSupervisor(t *testing.T) {
	nul := func(args ...string) []byte { return []byte(strings.Join(args, "\x00") + "\x00") }
	tests := []struct {
		name    string
		cmdline []byte
		id      string
		want    bool
	}{
		{"the supervisor", nul("/var/tmp/fwlab.x/bin/lab", "serve", "-state", "/run/flowweight-lab", "-dir", "/var/tmp/fwlab.x", "-id", "ab12"), "ab12", true},
		{"double-dash flag", nul("/x/lab", "serve", "--id", "ab12"), "ab12", true},
		{"another lab's supervisor", nul("/x/lab", "serve", "-id", "cd34"), "ab12", false},
		{"lab status, not serve", nul("/x/lab", "status", "-id", "ab12"), "ab12", false},
		{"a recycled pid running something else", nul("/usr/bin/sleep", "serve", "-id", "ab12"), "ab12", false},
		{"id only as a prefix of the value", nul("/x/lab", "serve", "-id", "ab123"), "ab12", false},
		{"id flag without value", nul("/x/lab", "serve", "-id"), "ab12", false},
		{"empty (kernel thread or gone)", nil, "ab12", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsSupervisor(tt.cmdline, tt.id); got != tt.want {
				t.Errorf("IsSupervisor(%q, %q) = %v, want %v", tt.cmdline, tt.id, got, tt.want)
			}
		})
	}
}

func TestOrdered(t *testing.T) {
	names := []string{"be1", "be2", "be3"}
	tests := []struct {
		name string
		w    map[string]uint16
		want bool
	}{
		{"by capacity", map[string]uint16{"be1": 122, "be2": 285, "be3": 593}, true},
		{"tie", map[string]uint16{"be1": 300, "be2": 300, "be3": 400}, false},
		{"reversed", map[string]uint16{"be1": 593, "be2": 285, "be3": 122}, false},
		{"a backend without a bucket reads 0", map[string]uint16{"be2": 285, "be3": 593}, true},
		{"middle evicted", map[string]uint16{"be1": 300, "be3": 700}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Ordered(names, tt.w); got != tt.want {
				t.Errorf("Ordered(%v) = %v, want %v (%s)", tt.w, got, tt.want, weightsText(names, tt.w))
			}
		})
	}
	if Ordered(nil, nil) {
		t.Error("Ordered of no backends is true; nothing was shown")
	}
}

func TestNoDebug(t *testing.T) {
	var out bytes.Buffer
	w := &noDebug{w: &out}
	in := "time=1 level=DEBUG msg=run lab=fwsweep cmd=\"ip netns list\"\n" +
		"time=2 level=WARN msg=\"killing leftover process in namespace\" ns=fwab12-be1 pid=7\n" +
		"time=3 level=DEBUG msg=run cmd=x\ntime=4 level=INFO msg=partial"
	// Written in odd pieces, as a logger may.
	for len(in) > 0 {
		n := min(7, len(in))
		if _, err := w.Write([]byte(in[:n])); err != nil {
			t.Fatal(err)
		}
		in = in[n:]
	}
	want := "time=2 level=WARN msg=\"killing leftover process in namespace\" ns=fwab12-be1 pid=7\n"
	if out.String() != want {
		t.Errorf("passed on %q, want %q (an unfinished line waits for its newline)", out.String(), want)
	}
}

// dirProcs must never count the lab command itself or whoever started it (`timeout 300
// DIR/bin/lab up -dir DIR` names the directory) as a leftover of the lab.
func TestAncestors(t *testing.T) {
	a := ancestors(os.Getpid())
	for _, pid := range []int{os.Getpid(), os.Getppid()} {
		if !a[pid] {
			t.Errorf("ancestors(%d) = %v lacks %d", os.Getpid(), a, pid)
		}
	}
	if a[1] {
		t.Errorf("ancestors includes init: %v", a)
	}
}
