package health

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// StatusRange is an inclusive range of HTTP status codes.
type StatusRange struct{ Lo, Hi int }

// StatusRanges is a set of status ranges; a code is accepted when any range contains it.
type StatusRanges []StatusRange

// Contains reports whether code lies in one of the ranges.
func (rs StatusRanges) Contains(code int) bool {
	for _, r := range rs {
		if code >= r.Lo && code <= r.Hi {
			return true
		}
	}
	return false
}

// ParseStatusRanges parses "200-399" or "200,204,300-302". Codes must lie in 100-599.
func ParseStatusRanges(s string) (StatusRanges, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("empty: give codes or ranges such as \"200-399\"")
	}
	var rs StatusRanges
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		if !isRange {
			hi = lo
		}
		l, err1 := parseStatus(lo)
		h, err2 := parseStatus(hi)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("%q: %w", part, err)
		}
		if l > h {
			return nil, fmt.Errorf("%q: range is reversed", part)
		}
		rs = append(rs, StatusRange{l, h})
	}
	return rs, nil
}

func parseStatus(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not a status code", s)
	}
	if n < 100 || n > 599 {
		return 0, fmt.Errorf("status %d is outside 100-599", n)
	}
	return n, nil
}
