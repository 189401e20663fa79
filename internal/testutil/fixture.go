package testutil

import (
	"fmt"
	"os"
	"strings"
)

// Fixture is the content of a test's fixture file, such as testdata/web.toml: a configuration
// several tests start from lives in one file instead of a string literal copied into each.
// A missing file is a bug in the test, not a failure of the code under test: it panics, which
// also works where there is no testing.T (a package-level var).
func Fixture(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		panic(fmt.Sprintf("test fixture: %v", err))
	}
	return string(b)
}

// Edit is text with each old replaced by its new (pairs: old1, new1, old2, new2, ...), once,
// in order. An old that is not in the text panics: a test whose edit no longer applies (the
// fixture changed under it) would otherwise test the unedited fixture and pass for nothing.
func Edit(text string, pairs ...string) string {
	if len(pairs)%2 != 0 {
		panic("testutil.Edit: pairs of old and new")
	}
	for i := 0; i < len(pairs); i += 2 {
		old, repl := pairs[i], pairs[i+1]
		if !strings.Contains(text, old) {
			panic(fmt.Sprintf("testutil.Edit: %q is not in the fixture", old))
		}
		text = strings.Replace(text, old, repl, 1)
	}
	return text
}
