package layers

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "flowweight"

// rules: a package whose import path starts with the key must not import a path starting with
// any of the values (non-test files only). Each line is a sentence of a doc.go.
var rules = []struct {
	pkg    string
	not    []string
	exempt []string // packages under pkg the rule does not cover
}{
	// Shared code knows none of the products.
	{"flowweight/internal/", []string{"flowweight/probe", "flowweight/collector", "flowweight/weights", "flowweight/controller"}, nil},
	// The weights are pure arithmetic: no I/O, no logging, no knowledge of who feeds them.
	{"flowweight/weights", []string{"flowweight/collector", "flowweight/probe", "flowweight/controller", "os", "net", "log", "log/slog"},
		[]string{"flowweight/weights/sim"}},
	// The simulator may use the planner's exact slot model, nothing else of the controller.
	{"flowweight/weights/sim", []string{"flowweight/collector", "flowweight/probe", "flowweight/controller/balancer",
		"flowweight/controller/switchsync", "flowweight/controller/ofswitch", "os", "net", "log/slog"}, []string{"flowweight/weights/sim/cmd"}},
	// The collector ingests and keeps state; it does not compute placement or talk OpenFlow.
	{"flowweight/collector", []string{"flowweight/controller", "flowweight/probe"}, nil},
	// The probe shares only the wire format and the shared code with the collector.
	{"flowweight/probe", []string{"flowweight/controller", "flowweight/collector/push", "flowweight/collector/snmp", "flowweight/weights"}, nil},
	// An intent is values: built by the balancer, read by the syncers.
	{"flowweight/controller/intent", []string{"flowweight/controller/balancer", "flowweight/controller/switchsync",
		"flowweight/controller/ofswitch", "flowweight/controller/config", "flowweight/collector", "os", "log/slog"}, nil},
	// A syncer owns one switch and never reaches back into the balancer's state.
	{"flowweight/controller/switchsync", []string{"flowweight/controller/balancer", "flowweight/controller/config",
		"flowweight/controller/api", "flowweight/collector", "flowweight/weights"}, nil},
	// The planner and the session below it know nothing of the loops above them.
	{"flowweight/controller/dataplane", []string{"flowweight/controller/balancer", "flowweight/controller/switchsync",
		"flowweight/controller/intent", "flowweight/controller/config", "flowweight/collector"}, nil},
	{"flowweight/controller/ofswitch", []string{"flowweight/controller/balancer", "flowweight/controller/switchsync",
		"flowweight/controller/dataplane", "flowweight/controller/config"}, nil},
	// The OpenFlow codec is a leaf: the bytes only, nothing of flowweight.
	{"flowweight/controller/ofwire", []string{"flowweight/"}, nil},
	{"flowweight/controller/arp", []string{"flowweight/controller/balancer", "flowweight/controller/ofswitch", "flowweight/controller/config"}, nil},
	{"flowweight/controller/state", []string{"flowweight/controller/balancer", "flowweight/controller/config"}, nil},
	{"flowweight/controller/cfgwatch", []string{"flowweight/controller/balancer", "flowweight/controller/config"}, nil},
	{"flowweight/controller/ratelog", []string{"flowweight/"}, nil},
	// The election is standalone: the controller asks it, it knows nothing of the controller.
	{"flowweight/controller/ha", []string{"flowweight/"}, nil},
}

// TestImportRules reads every non-test Go file's imports and checks them against rules.
func TestImportRules(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	imports := map[string]map[string]string{} // package -> import -> a file importing it
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		pkg := module + "/" + filepath.ToSlash(rel)
		if imports[pkg] == nil {
			imports[pkg] = map[string]string{}
		}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			imports[pkg][p] = filepath.Base(path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil || len(imports) < 20 {
		t.Fatalf("found %d packages under %s: not the repository root", len(imports), root)
	}
	checked := 0
	for _, r := range rules {
		matched := false
		for pkg, ims := range imports {
			if !under(pkg, r.pkg) || exempt(pkg, r.exempt) {
				continue
			}
			matched = true
			for im, file := range ims {
				for _, bad := range r.not {
					if under(im, bad) && !under(im, pkg) {
						t.Errorf("%s (%s) imports %s: %s must not import %s", pkg, file, im, r.pkg, bad)
					}
				}
			}
		}
		if !matched {
			t.Errorf("rule for %s matches no package: stale rule", r.pkg)
		}
		checked++
	}
	// Nothing but the binary, its API and the tools above it imports the balancer.
	for pkg, ims := range imports {
		if _, ok := ims["flowweight/controller/balancer"]; ok &&
			pkg != "flowweight/controller" && pkg != "flowweight/controller/api" && !under(pkg, "flowweight/e2e") {
			t.Errorf("%s imports the balancer: only the controller binary, its API and e2e tools may", pkg)
		}
	}
	t.Logf("%d rules over %d packages", checked, len(imports))
}

// under reports whether the import path p is prefix or inside it: a prefix ending in "/"
// matches below it only, "os" matches "os" and "os/exec" but not "osext".
func under(p, prefix string) bool {
	if strings.HasSuffix(prefix, "/") {
		return strings.HasPrefix(p, prefix)
	}
	return p == prefix || strings.HasPrefix(p, prefix+"/")
}

func exempt(pkg string, list []string) bool {
	for _, e := range list {
		if under(pkg, e) {
			return true
		}
	}
	return false
}
