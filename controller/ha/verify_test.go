package ha

import (
	"strings"
	"testing"
)

// TestSuperseded: only etcd's election deposes: the first key being ours, created in our
// term, keeps us leading; any other first key, none, or ours created again does not.
func TestSuperseded(t *testing.T) {
	const ours = "/p/leader/694d7f1c"
	for _, tc := range []struct {
		name, first string
		rev         int64
		want        string // a part of the reason; "" keeps leading
	}{
		{"ours, in our term", ours, 7, ""},
		{"another key first", "/p/leader/694d7f99", 9, "leader key is now /p/leader/694d7f99 (term 9)"},
		{"no key at all", "", 0, "our key is gone"},
		{"ours created again", ours, 12, "created again, in term 12"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := superseded(ours, 7, tc.first, tc.rev)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("superseded = %q, want %q", got, tc.want)
			}
		})
	}
}
