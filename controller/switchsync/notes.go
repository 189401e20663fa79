package switchsync

import (
	"fmt"
	"log/slog"
	"sync"

	"flowweight/controller/dataplane"
)

// Notes logs a service's layout notes (a backend lifted to one slot, backends left without a
// slot) when they appear. It is shared by every syncer, with its own lock: a note is the same
// on every switch with the same slot table, and a fleet must not log it once per switch. A
// note already present at the last plan is not logged again, however its figures move; the
// remembered set is per service and table size, so it stays bounded by the configuration.
type Notes struct {
	log   *slog.Logger
	mu    sync.Mutex
	noted map[string]map[string]bool
}

// NewNotes logs to log.
func NewNotes(log *slog.Logger) *Notes {
	return &Notes{log: log, noted: map[string]map[string]bool{}}
}

// Note checks the layouts of svcs as planned with opt.
func (n *Notes) Note(svcs []dataplane.Service, opt dataplane.Options) {
	slots := dataplane.LayoutSlots(opt.OVS)
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, s := range svcs {
		key := fmt.Sprintf("%s/%d", s.Name, slots)
		now := map[string]bool{}
		for _, note := range dataplane.Layout(s, opt).Notes {
			now[note.Key] = true
			if !n.noted[key][note.Key] {
				n.log.Warn("realised split differs from the computed one", "service", s.Name, "slots", slots, "note", note.Text)
			}
		}
		n.noted[key] = now
	}
}

// Forget drops what was noted for services not in keep (a reload removed them).
func (n *Notes) Forget(keep map[string]bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for key := range n.noted {
		name := key
		for i := len(key) - 1; i >= 0; i-- {
			if key[i] == '/' {
				name = key[:i]
				break
			}
		}
		if !keep[name] {
			delete(n.noted, key)
		}
	}
}
