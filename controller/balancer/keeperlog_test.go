package balancer

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"flowweight/controller/state"
	"flowweight/controller/view"
)

// brokenStore is a store whose document cannot be read.
type brokenStore struct{ kind, path string }

func (brokenStore) Load(context.Context) (*state.File, error) {
	return nil, errors.New("unreadable")
}
func (brokenStore) Save(context.Context, *state.File) (bool, error)          { return false, nil }
func (brokenStore) SetDrain(context.Context, string, bool) error             { return nil }
func (brokenStore) WatchDrains(context.Context, func(map[string]bool)) error { return nil }
func (s brokenStore) Where() (string, string)                                { return s.kind, s.path }

// TestUnusableStateSaysWhatIsLost: when the state cannot be read, the log line and the event
// name what is not applied. The state file carries the operator drains; with HA they are etcd
// keys of their own, untouched by a bad document, so the line must not say they are lost (and
// carries no empty file attribute).
func TestUnusableStateSaysWhatIsLost(t *testing.T) {
	for _, tc := range []struct {
		store    brokenStore
		drains   bool
		fileAttr string
	}{
		{brokenStore{seedFromState, "/var/lib/flowweight/controller.state"}, true, "file=/var/lib/flowweight/controller.state"},
		{brokenStore{seedFromEtcd, ""}, false, ""},
	} {
		var buf bytes.Buffer
		events := view.NewLog(10)
		k := &keeper{store: tc.store, log: slog.New(slog.NewTextHandler(&buf, nil)), events: events, now: time.Now}
		k.load(context.Background(), testConfig(t, ""))
		line := buf.String()
		if got := strings.Contains(line, "operator drains"); got != tc.drains {
			t.Errorf("%s: log says drains are lost: %v, want %v: %s", tc.store.kind, got, tc.drains, line)
		}
		if tc.fileAttr != "" && !strings.Contains(line, tc.fileAttr) {
			t.Errorf("%s: log line lacks %s: %s", tc.store.kind, tc.fileAttr, line)
		}
		if tc.fileAttr == "" && strings.Contains(line, "file=") {
			t.Errorf("%s: log line carries a file attribute: %s", tc.store.kind, line)
		}
		evs := events.List()
		if len(evs) != 1 || strings.Contains(evs[0].Text, "drains") != tc.drains {
			t.Errorf("%s: events %+v: want one, naming drains: %v", tc.store.kind, evs, tc.drains)
		}
	}
}
