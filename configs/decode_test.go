package configs

import (
	"strings"
	"testing"
	"time"
)

type sample struct {
	A struct {
		N int           `toml:"n"`
		D time.Duration `toml:"d"`
	} `toml:"a"`
	L []struct {
		X string `toml:"x"`
	} `toml:"l"`
}

func TestDecode(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"ok", "[a]\nn = 1\nd = \"2s\"\n[[l]]\nx = \"y\"\n", ""},
		{"unknown key with line", "[a]\nn = 1\n\n[[l]]\nx = \"y\"\nz = 2\n", `f.toml:6: unknown key "l.z"`},
		{"unknown table", "[b]\nn = 1\n", `f.toml:1: unknown key "b"`},
		{"same name in another table", "[a]\nx = 1\n[[l]]\nx = \"y\"\n", `f.toml:2: unknown key "a.x"`},
		{"wrong type", "[a]\nn = \"one\"\n", `f.toml:2: key "a.n"`},
		{"bad duration", "[a]\nd = \"soon\"\n", `key "a.d"`},
		{"syntax", "[a\n", "f.toml:2: expected"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s sample
			err := Decode("f.toml", []byte(c.in), &s)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if s.A.D != 2*time.Second || s.L[0].X != "y" {
					t.Fatalf("decoded %+v", s)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
		})
	}
}

func TestProblems(t *testing.T) {
	var p Problems
	if p.Err() != nil {
		t.Fatal("empty Problems is an error")
	}
	p.Addf("a.b", "bad %d", 1)
	p.Add("c", nil)
	p.Add("d", errString("worse"))
	if got := p.Err().Error(); got != "a.b: bad 1\nd: worse" {
		t.Fatalf("got %q", got)
	}
}

type errString string

func (e errString) Error() string { return string(e) }
