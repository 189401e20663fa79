package slots

// How computed weights become buckets (docs/dataplane.md, "Exact shares"). The controller
// apportions the switch's whole slot table itself — N = 256 slots on Open vSwitch 2.17 and
// later, 64 on older or unknown switches (Size) — and writes bucket weights that make Open
// vSwitch build exactly that table, so the realised split is the computed one to 1/N. With
// one bucket per live backend whose weight is its slot count (Weighted), the counts sum to N;
// controller/dataplane also lays stateless groups out as N buckets of weight 1, one per slot.

// Size is the slot-table size the controller lays groups out for on Open vSwitch v: 256 from
// 2.17, 64 for older and unknown switches (64 slots stay inside every dp_hash limit).
func Size(v Version) int {
	if v.MaxHash() >= 256 {
		return 256
	}
	return 64
}

// Bucket is one planned bucket: the part (the position in the counts) it sends to, and its
// weight.
type Bucket struct {
	Part   int
	Weight uint16
}

// Weighted returns the buckets that make Open vSwitch build a table with exactly counts[i]
// slots for part i (counts summing to the table size, as Apportion gives them): one bucket
// per part with slots, of weight its count. When every count is at least 2 the switch would
// build a smaller table (it sizes the table by total/smallest weight), so one slot of the
// first part moves to an extra bucket of weight 1 at the end with the same part: total N,
// smallest 1, so the table has N slots and Webster gives every bucket exactly its weight. A
// single part needs no extra bucket.
func Weighted(counts []int) []Bucket {
	var out []Bucket
	least := 0
	for i, c := range counts {
		if c == 0 {
			continue
		}
		out = append(out, Bucket{Part: i, Weight: uint16(c)})
		if least == 0 || c < least {
			least = c
		}
	}
	if len(out) > 1 && least > 1 {
		// The first bucket's part lends the slot: which parts have buckets, in which order,
		// then stays the same while the shares move (a restarted controller finds the same
		// bucket list), and every count is at least 2, so the lender keeps a slot.
		out[0].Weight--
		out = append(out, Bucket{Part: out[0].Part, Weight: 1})
	}
	return out
}

// For returns the slots of the switch's table that each weight (in order) gets when the
// controller lays a conntrack-mode group out for them on Open vSwitch v (Apportion over Size
// slots, Weighted buckets, the table OVS builds for those), and the table's size; 0 slots for
// a weight of 0. The simulator dispatches through it, so its split is exactly the switch's.
func For(weights []uint16, v Version) (slots []int, n int) {
	slots = make([]int, len(weights))
	var live []uint16
	var part []int // position in weights of each live weight
	for i, w := range weights {
		if w > 0 {
			live = append(live, w)
			part = append(part, i)
		}
	}
	if len(live) == 0 {
		return slots, 0
	}
	buckets := Weighted(Apportion(live, Size(v)))
	bw := make([]uint16, len(buckets))
	for i, b := range buckets {
		bw[i] = b.Weight
	}
	t := OVS(bw, v)
	for i, h := range t.Hits {
		slots[part[buckets[i].Part]] += h
	}
	return slots, t.NHash
}
