package ofwire

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestParseDesc(t *testing.T) {
	good := testDesc("3.1.0")
	d, err := ParseDesc(good)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Desc{"Nicira, Inc.", "Open vSwitch", "3.1.0", "None", "None"}); d != want {
		t.Errorf("ParseDesc = %+v, want %+v", d, want)
	}
	bad := bytes.Clone(good)
	bad[2*descStrLen] = 0xff
	cases := []struct {
		name  string
		body  []byte
		field string
	}{
		{"short", good[:DescLen-1], "1055 bytes"},
		{"long", append(bytes.Clone(good), 0), "1057 bytes"},
		{"empty", nil, "0 bytes"},
		{"sw_desc not UTF-8", bad, "sw_desc"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseDesc(c.body)
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.field) {
				t.Errorf("ParseDesc: error %v, want ErrMalformed naming %q", err, c.field)
			}
		})
	}
	// A field filling its whole width has no NUL: it is taken whole.
	full := bytes.Clone(good)
	copy(full[2*descStrLen:], bytes.Repeat([]byte("9"), descStrLen))
	if d, err := ParseDesc(full); err != nil || len(d.Software) != descStrLen || d.Serial != "None" {
		t.Errorf("ParseDesc of a full-width sw_desc = %+v, %v", d, err)
	}
}

func FuzzParseDesc(f *testing.F) {
	f.Add(testDesc("3.1.0"))
	f.Add(testDesc(""))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseDesc(b)
		if err != nil {
			return
		}
		for _, s := range []string{d.Manufacturer, d.Hardware, d.Software, d.Serial, d.Datapath} {
			if strings.IndexByte(s, 0) >= 0 {
				t.Fatalf("field %q keeps a NUL", s)
			}
		}
	})
}

// testDesc is Open vSwitch's DESC reply with software version sw.
func testDesc(sw string) []byte {
	return DescBody(Desc{Manufacturer: "Nicira, Inc.", Hardware: "Open vSwitch", Software: sw, Serial: "None", Datapath: "None"})
}
