package config

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// Removal is what a new configuration drops compared with the running one. A file cut short
// while it was written (a full disk, a crash, an editor that truncates first) is usually still
// valid TOML, and a valid file with fewer services silently withdraws VIPs from the switch.
// Compare lets a reload tell that apart from an ordinary edit and ask the operator to confirm.
type Removal struct {
	// Services are running services absent from the new file (by name): their VIP flows and
	// group would be deleted from every switch.
	Services []string
	// Emptied are services in both files that keep none of their running backends (by name).
	Emptied []string
	// Backends are running backends absent from the new file, as "service/backend".
	Backends []string
	// Running is how many backends the running configuration has.
	Running int
}

// Compare reports what replacing running with next would remove. Backends are compared by
// name: names are unique across a file, and a backend that moves from one service to another
// is not removed.
func Compare(running, next *Config) Removal {
	r := Removal{}
	nextSvc := map[string]*Service{}
	for i := range next.Services {
		nextSvc[next.Services[i].Name] = &next.Services[i]
	}
	nextBE := map[string]bool{}
	for _, s := range next.Services {
		for _, be := range s.Backends {
			nextBE[be.Name] = true
		}
	}
	for _, s := range running.Services {
		r.Running += len(s.Backends)
		for _, be := range s.Backends {
			if !nextBE[be.Name] {
				r.Backends = append(r.Backends, s.Name+"/"+be.Name)
			}
		}
		switch ns := nextSvc[s.Name]; {
		case ns == nil:
			r.Services = append(r.Services, s.Name)
		case !sharesBackend(&s, ns):
			r.Emptied = append(r.Emptied, s.Name)
		}
	}
	slices.Sort(r.Services)
	slices.Sort(r.Emptied)
	slices.Sort(r.Backends)
	return r
}

// sharesBackend reports whether the new definition of a service keeps at least one of its
// running backends (a backend moved elsewhere does not count for this service).
func sharesBackend(old, next *Service) bool {
	for _, a := range old.Backends {
		for _, b := range next.Backends {
			if a.Name == b.Name {
				return true
			}
		}
	}
	return false
}

// Mass reports whether the removal needs the operator's explicit confirmation. The rule:
//   - a running service is absent (its VIP would stop answering: a truncated file loses its
//     last services first, so even one is refused), or
//   - a service keeps none of its running backends, or
//   - more than half of all running backends are absent (2 of 3, 3 of 5; 1 of 2 is allowed).
//
// Adding, editing and removing fewer backends than that never needs confirmation.
func (r Removal) Mass() bool {
	return len(r.Services) > 0 || len(r.Emptied) > 0 || 2*len(r.Backends) > r.Running
}

// NeedsConfirmation reports whether a reload making this removal must be refused without
// -allow-removal: a mass removal, or any removal by content that looks cut short (cutShort,
// from CutShort). The running controller's reload and `controller rollback`'s check before it
// writes anything both ask this, so the two cannot disagree.
func (r Removal) NeedsConfirmation(cutShort string) bool {
	return r.Mass() || (cutShort != "" && r.Any())
}

// Any reports whether anything at all would be removed.
func (r Removal) Any() bool { return len(r.Services)+len(r.Emptied)+len(r.Backends) > 0 }

// EndsMidLine reports whether a configuration file's content does not end with a newline:
// the cheap sign of a file cut short at an arbitrary byte (a full disk, a crash half-way
// through a buffered write). Every editor, `echo >`, and the example end files with one. A
// reload of such a file that removes anything at all needs the confirmation Mass asks for.
// A file cut exactly at a line's end does not show it: those are covered by Mass alone.
func EndsMidLine(data []byte) bool { return len(data) > 0 && data[len(data)-1] != '\n' }

// CutShort says why next looks like a file cut short ("" when it does not): it ends mid-line
// (EndsMidLine), or it is a strict prefix of running, the content it replaces (a truncation
// of the same file, at a line's end too). A reload of such content that removes anything at
// all needs the confirmation Mass asks for. running may be nil (unknown).
func CutShort(running, next []byte) string {
	switch {
	case EndsMidLine(next):
		return "the file does not end with a newline, as a file cut short while written does"
	case len(next) < len(running) && bytes.HasPrefix(running, next):
		return "the file is the running file cut short (a strict prefix of it)"
	}
	return ""
}

// String says what would be removed, for the log line and the event of a refused reload.
func (r Removal) String() string {
	var parts []string
	if len(r.Services) > 0 {
		parts = append(parts, fmt.Sprintf("services %s (every VIP flow and group of theirs)", strings.Join(r.Services, ", ")))
	}
	if len(r.Emptied) > 0 {
		parts = append(parts, fmt.Sprintf("every backend of services %s", strings.Join(r.Emptied, ", ")))
	}
	if len(r.Backends) > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d backends (%s)", len(r.Backends), r.Running, strings.Join(r.Backends, ", ")))
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, "; ")
}
