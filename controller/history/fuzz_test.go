package history

import (
	"testing"
)

// FuzzDecode: whatever Decode accepts validates, and survives Encode and Decode again
// unchanged.
func FuzzDecode(f *testing.F) {
	e := NewEntry(3, []byte("[controller]\nlisten = \":6653\"\n"), "SIGHUP", "/etc/flowweight/controller.toml", t0)
	good, _ := Encode(&e)
	f.Add(good)
	f.Add([]byte(`{"format":1}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := Decode(data)
		if err != nil {
			return
		}
		if err := e.Validate(); err != nil {
			t.Fatalf("decoded an invalid entry: %v", err)
		}
		again, err := Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		e2, err := Decode(again)
		if err != nil || *e2 != *e {
			t.Fatalf("round trip: %+v, %v; want %+v", e2, err, e)
		}
	})
}

// FuzzDecodeRequest: whatever DecodeRequest accepts encodes and decodes again unchanged.
func FuzzDecodeRequest(f *testing.F) {
	good, _ := EncodeRequest(&Request{Format: Format, Version: 4, SHA256: NewEntry(1, []byte("x"), "s", "", t0).SHA256, Expires: t0, Refused: "no"})
	f.Add(good)
	f.Add([]byte(`{"format":1,"version":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeRequest(data)
		if err != nil {
			return
		}
		again, err := EncodeRequest(r)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := DecodeRequest(again)
		if err != nil || !r2.Expires.Equal(r.Expires) || r2.Version != r.Version || r2.SHA256 != r.SHA256 || r2.Refused != r.Refused {
			t.Fatalf("round trip: %+v, %v; want %+v", r2, err, r)
		}
	})
}
