package balancer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"flowweight/collector/push"
	"flowweight/controller/config"
	"flowweight/controller/state"
	"flowweight/controller/view"
	"flowweight/internal/report"

	"github.com/prometheus/client_golang/prometheus"
)

// Bounds on what the state file remembers of backends no longer configured: an operator's
// drain outlives a reload that removed the backend by a week, so putting it back does not
// quietly send it traffic; entries beyond these are dropped, oldest first.
const (
	RememberRemovedFor = 7 * 24 * time.Hour
	MaxRemembered      = 4096
	// DefaultStateEvery bounds how often learned capacity alone causes a write.
	DefaultStateEvery = time.Minute
)

// ReplayStore is the push server's replay high-water marks as the state file keeps them: one
// JSON value per backend, opaque to the balancer. The state file's "replay" section is read
// at start and handed to RestoreReplayState; ReplayState is saved with every write.
type ReplayStore interface {
	ReplayState() map[string]json.RawMessage
	RestoreReplayState(map[string]json.RawMessage)
}

// replayStoreOf adapts the push server to ReplayStore; tests replace it with a fake.
var replayStoreOf = func(srv *push.Server, log *slog.Logger) ReplayStore { return pushReplay{srv: srv, log: log} }

// pushReplay adapts the push server's marks (report.Mark, JSON) to ReplayStore.
type pushReplay struct {
	srv *push.Server
	log *slog.Logger
}

func (p pushReplay) ReplayState() map[string]json.RawMessage {
	marks := p.srv.ReplayMarks()
	out := make(map[string]json.RawMessage, len(marks))
	for name, m := range marks {
		if b, err := json.Marshal(m); err == nil {
			out[name] = b
		}
	}
	return out
}

// RestoreReplayState restores every mark that decodes; the others are named in one warning
// (the push server then judges those backends' first reports as after a first start).
func (p pushReplay) RestoreReplayState(in map[string]json.RawMessage) {
	marks := make(map[string]report.Mark, len(in))
	var bad []string
	for name, raw := range in {
		var m report.Mark
		if err := json.Unmarshal(raw, &m); err != nil {
			bad = append(bad, name)
			continue
		}
		marks[name] = m
	}
	err := p.srv.RestoreReplayMarks(marks)
	if len(bad) > 0 || err != nil {
		slices.Sort(bad)
		p.log.Warn("replay marks from the state file not all restored", "undecodable", bad, "err", err)
	}
}

// keeper is what the balancer saves and restores through its Store: it builds the document
// from the running services, decides when a write is due, and logs and counts the writes.
// The services are the balancer's, so build and remember are called under its lock; the
// keeper's own fields have locks of their own.
type keeper struct {
	store Store
	every time.Duration
	// off: nothing is kept (no state file, no HA).
	off    bool
	log    *slog.Logger
	events *view.Log
	now    func() time.Time
	writes *prometheus.CounterVec // flowweight_state_writes_total

	// weights are the weights the loaded document says were last written, by service and
	// backend: the first source of the start-up seed (seed.go); weightsFrom names the store
	// ("state file", "state in etcd"; "": none loaded). Set once by load, then only read.
	weights     map[string]map[string]uint16
	weightsFrom string

	mu sync.Mutex
	// remembered: backends the running configuration does not have (removed by a reload, or
	// in the document but not in the configuration at start), with what to restore when a
	// reload puts them back. Configured backends' state lives in the pool and the books.
	remembered map[string]state.Backend
	replay     map[string]json.RawMessage // as loaded, until a ReplayStore takes over
	rs         ReplayStore
	// weightsGen counts the updates that applied new weights; savedGen is the count the last
	// write included. New weights make a write due at the next period: the document is the
	// first source of a restart's seed (seed.go), so it must not lag the switches by every.
	weightsGen, savedGen, buildGen uint64

	wmu     sync.Mutex // serialises writes
	last    []byte     // the last content written, without its timestamp
	lastAt  time.Time
	failing bool
}

// load reads the store before the first install. It never fails: nothing saved is a first
// start, an unusable document is not applied (a state file is moved aside whole).
func (k *keeper) load(ctx context.Context, cfg *config.Config) {
	k.remembered = map[string]state.Backend{}
	if k.off {
		return
	}
	kind, path := k.store.Where()
	where := kind // "state file PATH", "state in etcd"
	if path != "" {
		where += " " + path
	}
	// The state file holds the operator drains too; with HA they are etcd keys of their own
	// (drains.go), which a bad or missing document does not touch.
	held, saved, file := "learned capacity and replay marks", "learned capacity", []any{}
	if path != "" {
		held, saved, file = "operator drains, learned capacity and replay marks", "drains and learned capacity", []any{"file", path}
	}
	f, err := k.store.Load(ctx)
	switch {
	case err != nil:
		k.log.Warn(kind+" unusable; starting without it: the "+held+" it held are not applied", append(file, "err", err)...)
		k.events.Add(view.Event{Time: k.now(), Kind: "error", Text: where + " unusable; saved " + saved + " not applied: " + err.Error()})
		return
	case f == nil:
		k.log.Info("no "+kind+" yet; starting without saved "+saved, file...)
		return
	}
	k.bound(f, where, cfg)
	drained := 0
	for name, e := range f.Backends {
		k.remembered[name] = e
		if e.OperatorDrain {
			drained++
		}
	}
	k.replay = f.Replay
	k.weights, k.weightsFrom = f.Weights, kind
	k.log.Info(kind+" loaded", append(file, "backends", len(f.Backends), "operator_drained", drained,
		"replay_marks", len(f.Replay), "services_with_weights", len(f.Weights), "written", f.Written)...)
}

// takeOver reads the document again for a new leader: learning must not fork between
// controllers, or a takeover would move weights by what the two learned differently. nil:
// nothing to take (none, or unusable: logged).
func (k *keeper) takeOver(ctx context.Context, cfg *config.Config) *state.File {
	cctx, cancel := context.WithTimeout(ctx, haTimeout)
	defer cancel()
	f, err := k.store.Load(cctx)
	if err != nil {
		k.log.Warn("taking over without the previous leader's learned capacity", "err", err)
		return nil
	}
	if f != nil {
		kind, _ := k.store.Where()
		k.bound(f, kind, cfg)
	}
	return f
}

// bound holds what was read, from the state file or from etcd alike, to the bound learning
// itself keeps (weighting.learn.max_factor): a learned capacity outside it is not applied,
// and each one is logged by name. One rule for both stores.
func (k *keeper) bound(f *state.File, source string, cfg *config.Config) {
	errs := f.DropLearnedOutside(cfg.Weighting.Learn.MaxFactor)
	for _, err := range errs {
		k.log.Warn("learned capacity not applied", "source", source, "err", err)
	}
	if len(errs) > 0 {
		k.events.Add(view.Event{Time: k.now(), Kind: "error", Text: fmt.Sprintf("%s: %d learned capacities outside weighting.learn.max_factor not applied; first: %v", source, len(errs), errs[0])})
	}
}

// remember keeps what must outlive a backend's removal by an install from prev to next, and
// returns what to restore into backends the install adds. Called with the balancer's lock
// held, before the swap.
func (k *keeper) remember(prev, next []*service, drained map[string]bool) (restoreDrain []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	configured := map[string]bool{}
	for _, s := range next {
		for _, be := range s.cfg.Backends {
			configured[be.Name] = true
		}
	}
	wasConfigured := map[string]bool{}
	for _, s := range prev {
		for j, be := range s.cfg.Backends {
			wasConfigured[be.Name] = true
			if configured[be.Name] {
				continue
			}
			// A host in several services: one entry, each service's learning in it.
			e, ok := k.remembered[be.Name]
			if !ok || e.Removed == nil {
				e = state.Backend{Service: s.cfg.Name, Removed: &now}
			}
			e.OperatorDrain = e.OperatorDrain || drained[be.Name]
			e.Learn(s.cfg.Name, learnedOf(s.books[j]))
			if e.OperatorDrain || e.LearnedCapacity != 0 || len(e.Also) > 0 {
				k.remembered[be.Name] = e
			}
		}
	}
	for _, s := range next {
		for j, be := range s.cfg.Backends {
			e, ok := k.remembered[be.Name]
			if !ok || wasConfigured[be.Name] {
				continue
			}
			if l := e.LearnedIn(s.cfg.Name); l != 0 && s.books[j].learned == 0 {
				s.books[j].learned = l
			}
			if e.OperatorDrain && !slices.Contains(restoreDrain, be.Name) {
				restoreDrain = append(restoreDrain, be.Name)
			}
		}
	}
	for name, e := range k.remembered {
		if configured[name] {
			delete(k.remembered, name)
		} else if e.Removed == nil {
			e.Removed = &now
			k.remembered[name] = e
		}
	}
	state.Prune(k.remembered, now, RememberRemovedFor, MaxRemembered)
	return restoreDrain
}

// learnedOf is a book's learned factor as the state file holds it (0: nothing learned).
func learnedOf(k book) float64 {
	if l := k.learned; l >= 1e-3 && l <= 1e3 && l != 1 {
		return l
	}
	return 0
}

// build assembles the document from the drains, the books (learned capacity), the applied
// weights and the remembered backends. Called with the balancer's lock held; the replay
// marks are added by save, outside it (the push server calls keyFor under its own lock).
func (k *keeper) build(services []*service, drained map[string]bool) *state.File {
	f := &state.File{Version: state.Version, Backends: map[string]state.Backend{}}
	for _, s := range services {
		for j, be := range s.cfg.Backends {
			e := f.Backends[be.Name] // a host in several services has one entry
			e.OperatorDrain = drained[be.Name]
			e.Learn(s.cfg.Name, learnedOf(s.books[j]))
			if e.OperatorDrain || e.LearnedCapacity != 0 || len(e.Also) > 0 {
				if e.Service == "" {
					e.Service = s.cfg.Name
				}
				f.Backends[be.Name] = e
			}
		}
	}
	for _, s := range services {
		if s.applied == nil {
			continue
		}
		if f.Weights == nil {
			f.Weights = map[string]map[string]uint16{}
		}
		ws := make(map[string]uint16, len(s.applied))
		for j, be := range s.cfg.Backends {
			ws[be.Name] = s.applied[j]
		}
		f.Weights[s.cfg.Name] = ws
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.buildGen = k.weightsGen
	state.Prune(k.remembered, k.now(), RememberRemovedFor, MaxRemembered) // a long run without reloads ages them too
	for name, e := range k.remembered {
		f.Backends[name] = e
	}
	return f
}

// applied records an update that applied new weights: a write is due at the next period.
func (k *keeper) applied() {
	k.mu.Lock()
	k.weightsGen++
	k.mu.Unlock()
}

// save writes the document build returns if its content changed since the last write. A
// failure is logged once (and again when writes work again) and counted; it never stops the
// controller. stopping: the last write at shutdown, bounded more tightly (a controller told
// to stop must stop, etcd or not).
func (k *keeper) save(stopping bool, build func() *state.File) {
	if k.off {
		return
	}
	k.wmu.Lock()
	defer k.wmu.Unlock()
	f := build()
	k.mu.Lock()
	rs, replay := k.rs, k.replay
	k.mu.Unlock()
	if rs != nil {
		replay = rs.ReplayState()
	}
	if len(replay) > 0 {
		f.Replay = replay
	}
	cmp, err := state.Encode(f)
	now := k.now()
	if err == nil && bytes.Equal(cmp, k.last) {
		k.lastAt = now
		k.markSaved()
		return
	}
	ok := false
	if err == nil {
		f.Written = now.UTC()
		timeout := haTimeout
		if stopping {
			timeout = haShutdownTimeout
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		ok, err = k.store.Save(ctx, f)
		cancel()
	}
	_, path := k.store.Where()
	switch {
	case err != nil:
		k.writes.WithLabelValues("error").Inc()
		if !k.failing {
			k.log.Warn("state file not written; operator drains and learned capacity will not survive a restart until it is",
				"file", path, "err", err)
			k.events.Add(view.Event{Time: now, Kind: "error", Text: "state file not written: " + err.Error()})
		}
		k.failing = true
		return
	case !ok:
		k.markSaved()
		return // a standby writes nothing; the leader's document stands
	}
	k.writes.WithLabelValues("ok").Inc()
	k.markSaved()
	if k.failing {
		k.log.Info("state file written again", "file", path)
	}
	k.failing, k.last, k.lastAt = false, cmp, now
}

// markSaved records that the weights of the last build need no further write.
func (k *keeper) markSaved() {
	k.mu.Lock()
	k.savedGen = k.buildGen
	k.mu.Unlock()
}

// due reports whether the periodic write is due: learned capacity at most once per every,
// newly applied weights at the period after they were applied.
func (k *keeper) due() bool {
	if k.off {
		return false
	}
	k.mu.Lock()
	moved := k.weightsGen != k.savedGen
	k.mu.Unlock()
	k.wmu.Lock()
	defer k.wmu.Unlock()
	return moved || k.now().Sub(k.lastAt) >= k.every
}

// attach hands the loaded replay marks to the push server once it exists; from then on its
// marks are what is saved.
func (k *keeper) attach(rs ReplayStore) {
	k.mu.Lock()
	loaded := k.replay
	k.rs = rs
	k.mu.Unlock()
	if len(loaded) > 0 {
		rs.RestoreReplayState(loaded)
	}
}

// adoptLearned gives the services the learned capacity f holds (a new leader takes its
// predecessor's) and returns how many backends took one. Called with the balancer's lock.
func adoptLearned(services []*service, f *state.File) int {
	n := 0
	for _, s := range services {
		for j, be := range s.cfg.Backends {
			if l := f.Backends[be.Name].LearnedIn(s.cfg.Name); l != 0 {
				s.books[j].learned = l
				n++
			}
		}
	}
	return n
}
