package health

import "testing"

func TestStatusRanges(t *testing.T) {
	tests := []struct {
		spec string
		in   []int
		out  []int
	}{
		{"200-399", []int{200, 301, 399}, []int{199, 400, 500}},
		{"200", []int{200}, []int{201, 204}},
		{"200, 204,300-302", []int{200, 204, 300, 302}, []int{201, 303}},
	}
	for _, tt := range tests {
		rs, err := ParseStatusRanges(tt.spec)
		if err != nil {
			t.Fatalf("%q: %v", tt.spec, err)
		}
		for _, c := range tt.in {
			if !rs.Contains(c) {
				t.Errorf("%q does not contain %d", tt.spec, c)
			}
		}
		for _, c := range tt.out {
			if rs.Contains(c) {
				t.Errorf("%q contains %d", tt.spec, c)
			}
		}
	}
}

func FuzzParseStatusRanges(f *testing.F) {
	for _, s := range []string{"200-399", "200,204", "", "-", "599-100", "1-2-3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rs, err := ParseStatusRanges(s)
		if err != nil {
			return
		}
		for _, r := range rs {
			if r.Lo < 100 || r.Hi > 599 || r.Lo > r.Hi {
				t.Fatalf("%q gave bad range %+v", s, r)
			}
		}
	})
}
