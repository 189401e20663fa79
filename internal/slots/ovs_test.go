package slots

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

var (
	ovs216 = Version{2, 16, 0}
	ovs310 = Version{3, 1, 0}
	ovs316 = Version{3, 1, 6}
	ovs350 = Version{3, 5, 0}
)

func TestParseVersion(t *testing.T) {
	cases := []struct {
		in   string
		want Version
		ok   bool
	}{
		{"3.1.0", ovs310, true},
		{" 2.17.9\x00", Version{2, 17, 9}, true},
		{"3.3.0-rc1", Version{3, 3, 0}, true},
		{"3.1.0+dfsg", ovs310, true},
		{"2.9", Version{2, 9, 0}, true},
		{"", Version{}, false},
		{"Open vSwitch", Version{}, false},
		{"3", Version{}, false},
		{"3.1.0.1", Version{}, false},
		{"3..1", Version{}, false},
		{"03.1.0", Version{}, false},
		{"0.0.0", Version{}, false},
		{"99999.1.0", Version{}, false},
	}
	for _, c := range cases {
		got, err := ParseVersion(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v, ok=%v", c.in, got, err, c.want, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("%q", strings.TrimSpace(c.in))) {
			t.Errorf("ParseVersion(%q): error %q does not name the input", c.in, err)
		}
	}
}

func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"3.1.0", "2.17.12", "3.3.0-rc1", "x", "1.2.3.4", "0.0.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseVersion(s)
		if err != nil {
			if v.Known() {
				t.Fatalf("ParseVersion(%q) failed but returned %v", s, v)
			}
			return
		}
		if !v.Known() {
			t.Fatalf("ParseVersion(%q) = zero version without error", s)
		}
		again, err := ParseVersion(v.String())
		if err != nil || again != v {
			t.Fatalf("ParseVersion(%q) = %v does not round-trip: %v, %v", s, v, again, err)
		}
	})
}

func TestVersionRules(t *testing.T) {
	cases := []struct {
		v      Version
		max    int
		term   bool
		layout int
	}{
		{Version{}, 64, false, 64},
		{Version{2, 9, 0}, 0, false, 64},
		{Version{2, 10, 0}, 64, false, 64},
		{ovs216, 64, false, 64},
		{Version{2, 17, 0}, 256, false, 256},
		{Version{3, 0, 8}, 256, false, 256},
		{ovs310, 256, false, 256},
		{Version{3, 1, 5}, 256, false, 256},
		{ovs316, 256, true, 256},
		{Version{3, 2, 3}, 256, false, 256},
		{Version{3, 2, 4}, 256, true, 256},
		{Version{3, 3, 2}, 256, false, 256},
		{Version{3, 3, 3}, 256, true, 256},
		{Version{3, 4, 0}, 256, false, 256},
		{Version{3, 4, 1}, 256, true, 256},
		{ovs350, 256, true, 256},
		{Version{4, 0, 0}, 256, true, 256},
	}
	for _, c := range cases {
		if got := c.v.MaxHash(); got != c.max {
			t.Errorf("%v.MaxHash() = %d, want %d", c.v, got, c.max)
		}
		if got := c.v.BucketTerm(); got != c.term {
			t.Errorf("%v.BucketTerm() = %v, want %v", c.v, got, c.term)
		}
		if got := Size(c.v); got != c.layout {
			t.Errorf("Size(%v) = %d, want %d", c.v, got, c.layout)
		}
	}
}

// TestOVSSlots holds the tables measured or logged on Open vSwitch (docs/dataplane.md) and the
// version rules.
func TestOVS(t *testing.T) {
	cases := []struct {
		name     string
		w        []uint16
		v        Version
		n        int
		hits     []int
		fallback bool
	}{
		{"700/200/100 on 3.1.0: 16 slots", []uint16{700, 200, 100}, ovs310, 16, []int{11, 3, 2}, false},
		{"equal thirds on 3.1.0", []uint16{334, 333, 333}, ovs310, 16, []int{6, 5, 5}, false},
		{"25:50:100 on 3.1.0", []uint16{25, 50, 100}, ovs310, 16, []int{2, 5, 9}, false},
		{"178/51/26/1 on 3.1.0: one slot per unit", []uint16{178, 51, 26, 1}, ovs310, 256, []int{178, 51, 26, 1}, false},
		{"zero bucket gets nothing", []uint16{0, 500, 500}, ovs310, 16, []int{0, 8, 8}, false},
		{"1:999 needs 1024 slots: fallback", []uint16{1, 999}, ovs310, 0, []int{0, 0}, true},
		{"1:200 on 2.16 needs 256 > 64: fallback", []uint16{1, 200}, ovs216, 0, []int{0, 0}, true},
		{"1:200 on 3.1.0: 256", []uint16{1, 200}, ovs310, 256, []int{1, 255}, false},
		{"anything before 2.10 falls back", []uint16{1, 1}, Version{2, 9, 0}, 0, []int{0, 0}, true},
		{"10 equal buckets on 3.1.0: 16 slots", slices.Repeat([]uint16{1}, 10), ovs310, 16, []int{2, 2, 2, 2, 2, 2, 1, 1, 1, 1}, false},
		{"10 equal buckets on 3.1.6: 4·10 → 64 slots", slices.Repeat([]uint16{1}, 10), ovs316, 64, []int{7, 7, 7, 7, 6, 6, 6, 6, 6, 6}, false},
		{"no weight: no table", []uint16{0, 0}, ovs310, 0, []int{0, 0}, false},
		{"no buckets", nil, ovs310, 0, []int{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := OVS(c.w, c.v)
			if got.NHash != c.n || got.Fallback != c.fallback || !reflect.DeepEqual(got.Hits, c.hits) {
				t.Errorf("OVS(%v, %v) = n %d fallback %v hits %v; want n %d fallback %v hits %v",
					c.w, c.v, got.NHash, got.Fallback, got.Hits, c.n, c.fallback, c.hits)
			}
			if len(got.Bucket) != got.NHash {
				t.Errorf("slot map has %d entries for %d slots", len(got.Bucket), got.NHash)
			}
		})
	}
	// Equal weights: Webster hands slot i to bucket i mod n (ties to the earlier bucket); the
	// stateless layout relies on it.
	tab := OVS(slices.Repeat([]uint16{1}, 256), ovs310)
	for i, b := range tab.Bucket {
		if b != i {
			t.Fatalf("256 unit buckets: slot %d goes to bucket %d, want %d", i, b, i)
		}
	}
	tab = OVS(slices.Repeat([]uint16{1}, 64), ovs350) // 4·64 = 256 slots
	for i, b := range tab.Bucket {
		if b != i%64 {
			t.Fatalf("64 unit buckets on 3.5.0: slot %d goes to bucket %d, want %d", i, b, i%64)
		}
	}
}
