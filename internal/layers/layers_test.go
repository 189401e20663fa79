package layers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
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
	// The weights are pure arithmetic: no I/O, no logging, no knowledge of who feeds them. The
	// simulator is held to the same (its command is a tool, under cmd/).
	{"flowweight/weights", []string{"flowweight/collector", "flowweight/probe", "flowweight/controller", "os", "net", "log", "log/slog"},
		nil},
	// Only the simulator dispatches through the switch's slot table (the planner's own model,
	// internal/slots); the weights stop at integer bucket weights.
	{"flowweight/weights", []string{"flowweight/internal/slots"}, []string{"flowweight/weights/sim"}},
	// The collector ingests and keeps state; it does not compute placement or talk OpenFlow.
	{"flowweight/collector", []string{"flowweight/controller", "flowweight/probe"}, nil},
	// The probe shares only the wire format (internal/report) and the shared code with the collector.
	{"flowweight/probe", []string{"flowweight/controller", "flowweight/collector", "flowweight/weights"}, nil},
	// The products and the shared code know nothing of the tools and the lab harness above them.
	{"flowweight/", []string{"flowweight/cmd", "flowweight/e2e"}, []string{"flowweight/cmd", "flowweight/e2e"}},
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
	// The read side reads what the balancer published; it holds no pointer back to it, and
	// the API reads it, not the balancer.
	{"flowweight/controller/view", []string{"flowweight/controller/balancer", "flowweight/controller/api",
		"flowweight/controller/config", "flowweight/controller/state", "flowweight/controller/ha"}, nil},
	{"flowweight/controller/api", []string{"flowweight/controller/balancer", "flowweight/controller/switchsync",
		"flowweight/controller/ofswitch"}, nil},
	{"flowweight/controller/cfgwatch", []string{"flowweight/controller/balancer", "flowweight/controller/config"}, nil},
	// The configuration history keeps files; it parses no configuration and knows no balancer.
	{"flowweight/controller/history", []string{"flowweight/controller/balancer", "flowweight/controller/config"}, nil},
	{"flowweight/controller/ratelog", []string{"flowweight/"}, nil},
	// Reactive dispatch chooses from values it is given (the located service, the counts);
	// it holds no session and no balancer.
	{"flowweight/controller/dispatch", []string{"flowweight/controller/balancer", "flowweight/controller/switchsync",
		"flowweight/controller/ofswitch", "flowweight/controller/config", "flowweight/collector"}, nil},
	// The collector's poll runner is given its jobs: it knows no configuration file and no switch.
	{"flowweight/collector/poll", []string{"flowweight/controller", "flowweight/probe", "flowweight/collector/push"}, nil},
	// The election is standalone: the controller asks it, it knows nothing of the controller.
	{"flowweight/controller/ha", []string{"flowweight/"}, nil},
}

// leaves import nothing of the project but the packages listed, and no I/O: plain arithmetic
// that both sides of a contract share (the slot model: the planner and the simulator; the
// largest remainder: the weights and the slot model).
var leaves = map[string][]string{
	"flowweight/internal/slots":     {"flowweight/internal/apportion"},
	"flowweight/internal/apportion": nil,
}

// readImports reads every non-test Go file's imports under the repository root: package ->
// import -> a file importing it; and which packages are named main.
func readImports(t *testing.T) (imports map[string]map[string]string, mains map[string]bool) {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	imports = map[string]map[string]string{}
	mains = map[string]bool{}
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
		if f.Name.Name == "main" {
			mains[pkg] = true
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
	return imports, mains
}

// TestImportRules checks every non-test Go file's imports against rules.
func TestImportRules(t *testing.T) {
	imports, mains := readImports(t)
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
	for leaf, allowed := range leaves {
		ims, ok := imports[leaf]
		if !ok {
			t.Errorf("leaf %s: no such package: stale rule", leaf)
		}
		for im, file := range ims {
			if (under(im, module) || under(im, "os") || under(im, "net") || under(im, "log")) && !exempt(im, allowed) {
				t.Errorf("%s (%s) imports %s: a leaf imports only %v of the project, and no I/O", leaf, file, im, allowed)
			}
		}
	}
	// Nothing but the binary and the tools above it imports the balancer: no package below
	// controller/ does (the API reads controller/view).
	for pkg, ims := range imports {
		if _, ok := ims["flowweight/controller/balancer"]; ok && pkg != "flowweight/controller" &&
			!under(pkg, "flowweight/cmd") && !under(pkg, "flowweight/e2e") {
			t.Errorf("%s imports the balancer: only the controller binary, the tools (cmd/) and e2e may", pkg)
		}
	}
	// The two products are the main packages at controller/ and probe/; every other command
	// is a tool and lives under cmd/, so the layout tells the products from the tools.
	for pkg := range mains {
		if pkg != "flowweight/controller" && pkg != "flowweight/probe" && !under(pkg, "flowweight/cmd") {
			t.Errorf("%s is a main package outside cmd/: only controller/ and probe/ are products, tools go under cmd/", pkg)
		}
	}
	for _, want := range []string{"flowweight/controller", "flowweight/probe", "flowweight/cmd/fwsim"} {
		if !mains[want] {
			t.Errorf("%s is not a main package: the main-package rule reads package clauses wrongly", want)
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

// TestOneWriterPerSwitch: only a switch's syncer writes to it (switchsync's doc.go), so no
// other controller package that can hold a session (imports ofswitch or switchsync) calls a
// method by the name of one of the session's writes, whatever its receiver or arguments (a
// name check: it cannot tell a session from another type with such a method, so those names
// are kept for the session's writes in such packages). The syncer does not hand its session
// out (Syncer.Serves only compares).
func TestOneWriterPerSwitch(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	writes := map[string]bool{"PacketOut": true, "Apply": true, "RequestRole": true, "Multipart": true, "MultipartLimit": true}
	allowed := []string{"controller/switchsync", "controller/ofswitch"}
	// Files where such a name is another type's, each with why.
	others := map[string]string{
		"controller/dataplane/fakeswitch.go": "the planner's fake switch applies plans to itself",
	}
	fset := token.NewFileSet()
	calls := 0
	err = filepath.WalkDir(filepath.Join(root, "controller"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(f.Imports, func(im *ast.ImportSpec) bool {
			return im.Path.Value == `"flowweight/controller/ofswitch"` || im.Path.Value == `"flowweight/controller/switchsync"`
		}) && !slices.Contains(allowed, rel) {
			return nil // holds no session: an Apply here is another type's
		}
		ast.Inspect(f, func(n ast.Node) bool {
			c, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if sel, ok := c.Fun.(*ast.SelectorExpr); ok && writes[sel.Sel.Name] {
				calls++
				file, _ := filepath.Rel(root, path)
				if _, other := others[filepath.ToSlash(file)]; !slices.Contains(allowed, rel) && !other {
					t.Errorf("%s: %s is called outside a switch's syncer", fset.Position(c.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls == 0 {
		t.Fatal("no write to a switch found at all: the check looks in the wrong place")
	}
}
