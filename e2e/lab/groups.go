package lab

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// BucketWeight is one bucket of a group as the switch reports it.
type BucketWeight struct {
	// BucketID is the printed bucket_id (OpenFlow 1.5 output) or, when the
	// output has none (OpenFlow 1.3), the bucket's position: Open vSwitch
	// numbers OpenFlow 1.1–1.4 buckets 0, 1, 2... in order.
	BucketID uint32
	Weight   uint16
	// Actions is the action list exactly as ovs-ofctl printed it.
	Actions string
}

// Group is one line of `ovs-ofctl dump-groups` output.
type Group struct {
	ID      uint32
	Type    string
	Buckets []BucketWeight
}

// ParseGroups parses `ovs-ofctl dump-groups` output (a header line, then one
// " group_id=N,type=T,bucket=...,bucket=..." line per group). Actions may
// contain commas and parentheses, e.g. ct(commit,nat(dst=IP:PORT)); buckets
// are split only at a top-level ",bucket=". Open vSwitch omits a weight equal
// to the default, which is 1 in select groups and 0 otherwise (recorded in
// testdata), so a missing weight reads as that default.
func ParseGroups(out string) ([]Group, error) {
	var groups []Group
	for i, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "group_id=") {
			continue
		}
		g, err := parseGroupLine(line)
		if err != nil {
			return nil, fmt.Errorf("dump-groups line %d %q: %w", i+1, line, err)
		}
		groups = append(groups, g)
	}
	return groups, nil
}

func parseGroupLine(line string) (Group, error) {
	parts := splitTop(line, ",bucket=")
	var g Group
	if !balanced(parts[0]) {
		return Group{}, fmt.Errorf("unbalanced parentheses before the buckets")
	}
	var sawID bool
	for _, kv := range splitTop(parts[0], ",") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "group_id":
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil {
				return Group{}, fmt.Errorf("group_id %q: %w", v, err)
			}
			g.ID, sawID = uint32(n), true
		case "type":
			if v == "" || strings.IndexFunc(v, unicode.IsSpace) >= 0 {
				return Group{}, fmt.Errorf("type %q", v)
			}
			g.Type = v
		}
	}
	if !sawID {
		return Group{}, fmt.Errorf("no group_id")
	}
	if g.Type == "" {
		return Group{}, fmt.Errorf("group %d: no type", g.ID)
	}
	for i, p := range parts[1:] {
		b, err := parseBucket(p, uint32(i), defaultWeight(g.Type))
		if err != nil {
			return Group{}, fmt.Errorf("group %d bucket %d: %w", g.ID, i, err)
		}
		g.Buckets = append(g.Buckets, b)
	}
	return g, nil
}

// defaultWeight is the bucket weight Open vSwitch assumes and does not print.
func defaultWeight(groupType string) uint16 {
	if groupType == "select" {
		return 1
	}
	return 0
}

func parseBucket(s string, index uint32, weight uint16) (BucketWeight, error) {
	b := BucketWeight{BucketID: index, Weight: weight}
	props, actions, ok := strings.Cut(s, "actions=")
	if !ok {
		return b, fmt.Errorf("%q: no actions=", s)
	}
	b.Actions = actions
	if !balanced(props) {
		return b, fmt.Errorf("%q: unbalanced parentheses before actions=", s)
	}
	for _, kv := range strings.Split(strings.TrimSuffix(props, ","), ",") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, ":")
		switch k {
		case "bucket_id":
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil {
				return b, fmt.Errorf("bucket_id %q: %w", v, err)
			}
			b.BucketID = uint32(n)
		case "weight":
			n, err := strconv.ParseUint(v, 10, 16)
			if err != nil {
				return b, fmt.Errorf("weight %q: %w", v, err)
			}
			b.Weight = uint16(n)
		}
	}
	return b, nil
}

// balanced reports whether every parenthesis in s is closed in order.
func balanced(s string) bool {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			if depth--; depth < 0 {
				return false
			}
		}
	}
	return depth == 0
}

// splitTop splits s at sep where sep is outside parentheses.
func splitTop(s, sep string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			if depth > 0 {
				depth--
			}
		}
		if depth == 0 && strings.HasPrefix(s[i:], sep) {
			out = append(out, s[start:i])
			i += len(sep) - 1
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// String renders the group as Open vSwitch prints it for OpenFlow 1.3
// (without the leading space; default weights omitted), the inverse of
// ParseGroups for such output.
func (g Group) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "group_id=%d,type=%s", g.ID, g.Type)
	for _, k := range g.Buckets {
		b.WriteString(",bucket=")
		if k.Weight != defaultWeight(g.Type) {
			fmt.Fprintf(&b, "weight:%d,", k.Weight)
		}
		b.WriteString("actions=" + k.Actions)
	}
	return b.String()
}
