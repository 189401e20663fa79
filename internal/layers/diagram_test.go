package layers

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// diagramFile holds the package diagram: the first ```mermaid block after the heading
// diagramHeading.
const (
	diagramFile    = "docs/design.md"
	diagramHeading = "## Packages and their imports"
)

var (
	nodeRE = regexp.MustCompile(`^\s*([A-Za-z0-9_]+)\["([a-z0-9_./]+)"\]\s*$`)
	edgeRE = regexp.MustCompile(`^\s*([A-Za-z0-9_]+)\s*-->\s*([A-Za-z0-9_]+)\s*$`)
)

// diagram is the picture: nodes by id (a package path below the module, or "path/..." for a
// folder of packages), and its arrows.
type diagram struct {
	paths map[string]string // id -> path
	edges [][2]string       // from id, to id
}

// parseDiagram reads the mermaid block: node lines `id["path"]`, arrow lines `a --> b`, and
// the flowchart header, comments (%%) and blank lines; anything else is an error, so the
// picture cannot say more than this test checks.
func parseDiagram(text string) (*diagram, error) {
	d := &diagram{paths: map[string]string{}}
	sc := bufio.NewScanner(strings.NewReader(text))
	inSection, inBlock, done := false, false, false
	line := 0
	for sc.Scan() && !done {
		line++
		l := sc.Text()
		switch {
		case !inSection:
			inSection = strings.TrimSpace(l) == diagramHeading
		case !inBlock:
			if strings.HasPrefix(l, "## ") {
				return nil, fmt.Errorf("section %q has no ```mermaid block", diagramHeading)
			}
			inBlock = strings.TrimSpace(l) == "```mermaid"
		case strings.TrimSpace(l) == "```":
			done = true
		default:
			t := strings.TrimSpace(l)
			if m := nodeRE.FindStringSubmatch(l); m != nil {
				if old, dup := d.paths[m[1]]; dup {
					return nil, fmt.Errorf("line %d: node %s declared again (%s)", line, m[1], old)
				}
				d.paths[m[1]] = m[2]
			} else if m := edgeRE.FindStringSubmatch(l); m != nil {
				d.edges = append(d.edges, [2]string{m[1], m[2]})
			} else if t != "" && !strings.HasPrefix(t, "%%") && !strings.HasPrefix(t, "flowchart ") {
				return nil, fmt.Errorf("line %d: %q is neither a node id[\"path\"] nor an arrow a --> b", line, t)
			}
		}
	}
	if !done {
		return nil, fmt.Errorf("no closed ```mermaid block under %q", diagramHeading)
	}
	for _, e := range d.edges {
		for _, id := range e {
			if _, ok := d.paths[id]; !ok {
				return nil, fmt.Errorf("arrow %s --> %s: node %s is not declared", e[0], e[1], id)
			}
		}
	}
	return d, nil
}

// nodeOf is the node a package belongs to: the node naming it, else the deepest "path/..."
// node above it; "" when none does.
func (d *diagram) nodeOf(pkg string) string {
	rel := strings.TrimPrefix(pkg, module+"/")
	best, bestLen := "", -1
	for id, p := range d.paths {
		if folder, ok := strings.CutSuffix(p, "/..."); ok {
			if (rel == folder || strings.HasPrefix(rel, folder+"/")) && len(folder) > bestLen {
				best, bestLen = id, len(folder)
			}
		} else if rel == p {
			return id
		}
	}
	return best
}

// TestPackageDiagram holds the package diagram in docs/design.md against the code: every
// package belongs to a node, every arrow is an import that exists, and every import between
// two nodes follows from the arrows (directly or through others, so the picture can leave out
// an arrow that a path already implies).
func TestPackageDiagram(t *testing.T) {
	imports, _ := readImports(t)
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	text, err := os.ReadFile(filepath.Join(root, diagramFile))
	if err != nil {
		t.Fatal(err)
	}
	d, err := parseDiagram(string(text))
	if err != nil {
		t.Fatalf("%s: %v", diagramFile, err)
	}
	code := map[[2]string]string{} // node arrow -> one import that makes it
	var unplaced []string
	for pkg, ims := range imports {
		from := d.nodeOf(pkg)
		if from == "" {
			unplaced = append(unplaced, pkg)
			continue
		}
		for im, file := range ims {
			if !under(im, module) {
				continue
			}
			to := d.nodeOf(im)
			if to != "" && to != from {
				code[[2]string{from, to}] = fmt.Sprintf("%s (%s) imports %s", pkg, file, im)
			}
		}
	}
	slices.Sort(unplaced)
	for _, p := range unplaced {
		t.Errorf("%s: package %s is in no node of the diagram", diagramFile, p)
	}
	drawn := map[[2]string]bool{}
	for _, e := range d.edges {
		drawn[e] = true
		if _, ok := code[e]; !ok {
			t.Errorf("%s: arrow %s --> %s (%s to %s): no such import in the code", diagramFile, e[0], e[1], d.paths[e[0]], d.paths[e[1]])
		}
	}
	reach := func(from, to string) bool {
		seen := map[string]bool{from: true}
		stack := []string{from}
		for len(stack) > 0 {
			n := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, e := range d.edges {
				if e[0] == n && !seen[e[1]] {
					if e[1] == to {
						return true
					}
					seen[e[1]] = true
					stack = append(stack, e[1])
				}
			}
		}
		return false
	}
	var missing []string
	for e, why := range code {
		if !drawn[e] && !reach(e[0], e[1]) {
			missing = append(missing, fmt.Sprintf("%s --> %s: %s", e[0], e[1], why))
		}
	}
	slices.Sort(missing)
	for _, m := range missing {
		t.Errorf("%s: no arrow or path for %s", diagramFile, m)
	}
}

// TestParseDiagram: the parser refuses what the check would otherwise ignore.
func TestParseDiagram(t *testing.T) {
	head := diagramHeading + "\n\n```mermaid\nflowchart TD\n"
	tests := []struct {
		name, text, err string
	}{
		{"good", head + "  a[\"weights\"]\n  b[\"internal/...\"]\n  a --> b\n```\n", ""},
		{"no section", "## Other\n```mermaid\n```\n", "no closed"},
		{"no block", diagramHeading + "\ntext\n## Next\n", "has no ```mermaid block"},
		{"unclosed", head + "  a[\"weights\"]\n", "no closed"},
		{"undeclared", head + "  a[\"weights\"]\n  a --> c\n```\n", "node c is not declared"},
		{"stray line", head + "  a[\"weights\"] --> b\n```\n", "neither a node"},
		{"duplicate", head + "  a[\"weights\"]\n  a[\"probe\"]\n```\n", "declared again"},
	}
	for _, tt := range tests {
		_, err := parseDiagram(tt.text)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.err)
		}
	}
}
