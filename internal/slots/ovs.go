package slots

import (
	"fmt"
	"strconv"
	"strings"
)

// Open vSwitch's select groups (with no selection method, always the case over OpenFlow 1.3)
// use dp_hash: each new flow's hash picks one of NHash slots and each slot names a bucket. The
// realised split of new connections is therefore the slot split, not the weight split. This
// file models the slot table exactly as ofproto/ofproto-dpif.c's group_setup_dp_hash_table
// builds it (see docs/dataplane.md, "How weights become a split"):
//
//   - n_hash = max(16, pow2(max(min_slots, min(4·n_buckets, 256)))), min_slots =
//     ceil(total_weight / smallest nonzero weight); the 4·n_buckets term only from 3.5.0 and
//     the backports 3.4.1, 3.3.3, 3.2.4 and 3.1.6;
//   - when n_hash exceeds 256 (64 before 2.17) the group silently falls back to a per-bucket
//     hash × weight score in the slow path, which is not proportional; before 2.10 there is no
//     dp_hash table at all;
//   - slots go to buckets one at a time, each to the bucket with the largest
//     weight/(2·hits+1) (Webster/Sainte-Laguë), ties to the earlier bucket.

// Version is an Open vSwitch release, as its OFPMP_DESC sw_desc names it ("3.1.0"). The zero
// value is an unknown version (or a switch that is not Open vSwitch).
type Version struct{ Major, Minor, Patch int }

// ParseVersion reads "MAJOR.MINOR[.PATCH]" followed by anything that does not start with a
// digit or a dot ("3.1.0", "2.17.9", "3.3.0-rc1", "3.1.0+dfsg"). It fails on anything else,
// so a switch whose software description is not a version number is treated as unknown.
func ParseVersion(s string) (Version, error) {
	s = strings.TrimSpace(s)
	end := strings.IndexFunc(s, func(r rune) bool { return r != '.' && (r < '0' || r > '9') })
	num := s
	if end >= 0 {
		num = s[:end]
	}
	parts := strings.Split(num, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return Version{}, fmt.Errorf("switch software %q is not an Open vSwitch version (MAJOR.MINOR.PATCH)", s)
	}
	var v [3]int
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > 9999 || (len(p) > 1 && p[0] == '0') {
			return Version{}, fmt.Errorf("switch software %q: version part %q is not a number", s, p)
		}
		v[i] = n
	}
	if v == [3]int{} {
		return Version{}, fmt.Errorf("switch software %q: version 0.0.0", s)
	}
	return Version{v[0], v[1], v[2]}, nil
}

// Known reports whether v is a parsed version rather than the zero value.
func (v Version) Known() bool { return v != Version{} }

func (v Version) String() string {
	if !v.Known() {
		return "unknown"
	}
	return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
}

// AtLeast reports whether v is major.minor.patch or later (false for an unknown version).
func (v Version) AtLeast(major, minor, patch int) bool {
	if v.Major != major {
		return v.Major > major
	}
	if v.Minor != minor {
		return v.Minor > minor
	}
	return v.Patch >= patch
}

// MaxHash is the largest slot table the switch builds by default: 256 from 2.17, 64 from 2.10,
// 0 before (no dp_hash table; every group takes the slow-path score). An unknown version is
// modelled as 2.10–2.16.
func (v Version) MaxHash() int {
	switch {
	case !v.Known():
		return 64
	case v.AtLeast(2, 17, 0):
		return 256
	case v.AtLeast(2, 10, 0):
		return 64
	}
	return 0
}

// BucketTerm reports whether the switch raises the table to 4·n_buckets slots (3.5.0 and the
// backports 3.4.1, 3.3.3, 3.2.4, 3.1.6; not 3.0.x or 2.17.x).
func (v Version) BucketTerm() bool {
	switch {
	case v.AtLeast(3, 5, 0):
		return true
	case v.Major == 3 && v.Minor == 4:
		return v.Patch >= 1
	case v.Major == 3 && v.Minor == 3:
		return v.Patch >= 3
	case v.Major == 3 && v.Minor == 2:
		return v.Patch >= 4
	case v.Major == 3 && v.Minor == 1:
		return v.Patch >= 6
	}
	return false
}

// Table is the dp_hash table a switch builds for one select group.
type Table struct {
	// NHash is the number of slots; 0 when the group has no dp_hash table (Fallback, or no
	// bucket with weight).
	NHash int
	// Fallback is set when the switch would need more slots than it allows (or has no dp_hash
	// at all) and uses its non-proportional per-bucket hash × weight score instead.
	Fallback bool
	// Hits is the number of slots of each bucket, in bucket order.
	Hits []int
	// Bucket is the bucket index of each slot, in slot order.
	Bucket []int
}

// OVS returns the slot table Open vSwitch v builds for buckets of the given weights, in
// bucket order.
func OVS(weights []uint16, v Version) Table {
	t := Table{Hits: make([]int, len(weights))}
	total, least := 0, 0
	for _, w := range weights {
		if w > 0 && (least == 0 || int(w) < least) {
			least = int(w)
		}
		total += int(w)
	}
	if total == 0 {
		return t
	}
	want := (total + least - 1) / least
	if v.BucketTerm() {
		want = max(want, min(4*len(weights), 256))
	}
	n := 16
	for n < want {
		n *= 2
	}
	if max := v.MaxHash(); n > max {
		t.Fallback = true
		return t
	}
	t.NHash = n
	t.Bucket = make([]int, n)
	// The same arithmetic as the switch (IEEE double division), so ties fall the same way.
	value := make([]float64, len(weights))
	divisor := make([]float64, len(weights))
	for i, w := range weights {
		value[i], divisor[i] = float64(w), 1
	}
	for s := range n {
		win := 0
		for i := 1; i < len(weights); i++ {
			if value[i] > value[win] {
				win = i
			}
		}
		t.Hits[win]++
		divisor[win] += 2
		value[win] = float64(weights[win]) / divisor[win]
		t.Bucket[s] = win
	}
	return t
}
