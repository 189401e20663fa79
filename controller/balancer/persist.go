package balancer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"slices"
	"sync"
	"time"

	"flowweight/collector/push"
	"flowweight/controller/config"
	"flowweight/controller/state"
	"flowweight/internal/report"
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

// persister is the state file's side of the balancer. remembered and replay are guarded by
// Balancer.mu; the rest by wmu, which serialises writes.
type persister struct {
	path  string
	every time.Duration

	// remembered: backends the running configuration does not have (removed by a reload, or
	// in the state file but not in the configuration at start), with what to restore when a
	// reload puts them back. Configured backends' state lives in the pool and the books.
	remembered map[string]state.Backend
	replay     map[string]json.RawMessage // as loaded, until a ReplayStore takes over
	// weights are the weights the loaded file says were last written, by service and backend:
	// the first source of the start-up seed (seed.go); weightsFrom names the file ("state
	// file", "state in etcd"; "": none loaded).
	weights     map[string]map[string]uint16
	weightsFrom string
	// weightsGen counts the updates that applied new weights; savedGen is the count the last
	// write included. New weights make a write due at the next period: the file is the first
	// source of a restart's seed (seed.go), so it must not lag the switches by StateEvery.
	weightsGen, savedGen, buildGen uint64
	store                          ReplayStore

	wmu     sync.Mutex
	last    []byte // the last content written, without its timestamp
	lastAt  time.Time
	failing bool
}

// loadState reads the state file before the first install. It never fails: a missing file is
// a first start, an unusable one is moved aside and the controller starts without it.
func (b *Balancer) loadState(cfg *config.Config) {
	p := &b.st
	p.remembered = map[string]state.Backend{}
	if p.path == "" {
		return
	}
	f, err := state.Load(p.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		b.log.Info("no state file yet; starting without saved drains or learned capacity", "file", p.path)
		return
	case err != nil:
		aside, qerr := state.Quarantine(p.path)
		b.log.Warn("state file unusable; starting without it: the operator drains, learned capacity and replay marks it held are not applied",
			"file", p.path, "err", err, "kept_as", aside, "move_err", qerr)
		b.events.add(Event{Time: b.now(), Kind: "error", Text: "state file " + p.path + " unusable, kept as " + aside + "; saved drains and learned capacity not applied: " + err.Error()})
		return
	}
	b.boundLearned(f, "state file "+p.path, cfg)
	drained := 0
	for name, e := range f.Backends {
		p.remembered[name] = e
		if e.OperatorDrain {
			drained++
		}
	}
	p.replay = f.Replay
	p.weights, p.weightsFrom = f.Weights, seedFromState
	b.log.Info("state file loaded", "file", p.path, "backends", len(f.Backends), "operator_drained", drained,
		"replay_marks", len(f.Replay), "services_with_weights", len(f.Weights), "written", f.Written)
}

// boundLearned holds what was read, from the state file or from etcd alike, to the bound
// learning itself keeps (weighting.learn.max_factor): a learned capacity outside it is not
// applied, and each one is logged by name. One rule for both sources.
func (b *Balancer) boundLearned(f *state.File, source string, cfg *config.Config) {
	errs := f.DropLearnedOutside(cfg.Weighting.Learn.MaxFactor)
	for _, err := range errs {
		b.log.Warn("learned capacity not applied", "source", source, "err", err)
	}
	if len(errs) > 0 {
		b.events.add(Event{Time: b.now(), Kind: "error", Text: fmt.Sprintf("%s: %d learned capacities outside weighting.learn.max_factor not applied; first: %v", source, len(errs), errs[0])})
	}
}

// rememberLocked keeps what must outlive a backend's removal by this install, and returns what
// to restore into backends this install adds. Called with b.mu held, before the swap.
func (b *Balancer) rememberLocked(next []*service, drained map[string]bool) (restoreDrain []string) {
	p := &b.st
	now := b.now()
	configured := map[string]bool{}
	for _, s := range next {
		for _, be := range s.cfg.Backends {
			configured[be.Name] = true
		}
	}
	wasConfigured := map[string]bool{}
	for _, s := range b.services {
		for j, be := range s.cfg.Backends {
			wasConfigured[be.Name] = true
			if configured[be.Name] {
				continue
			}
			// A host in several services: one entry, each service's learning in it.
			e, ok := p.remembered[be.Name]
			if !ok || e.Removed == nil {
				e = state.Backend{Service: s.cfg.Name, Removed: &now}
			}
			e.OperatorDrain = e.OperatorDrain || drained[be.Name]
			e.Learn(s.cfg.Name, learnedOf(s.books[j]))
			if e.OperatorDrain || e.LearnedCapacity != 0 || len(e.Also) > 0 {
				p.remembered[be.Name] = e
			}
		}
	}
	for _, s := range next {
		for j, be := range s.cfg.Backends {
			e, ok := p.remembered[be.Name]
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
	for name, e := range p.remembered {
		if configured[name] {
			delete(p.remembered, name)
		} else if e.Removed == nil {
			e.Removed = &now
			p.remembered[name] = e
		}
	}
	state.Prune(p.remembered, now, RememberRemovedFor, MaxRemembered)
	return restoreDrain
}

// learnedOf is a book's learned factor as the state file holds it (0: nothing learned).
func learnedOf(k book) float64 {
	if l := k.learned; l >= 1e-3 && l <= 1e3 && l != 1 {
		return l
	}
	return 0
}

// buildState assembles the file from the pool (drains), the books (learned capacity), the
// remembered backends and the replay marks.
func (b *Balancer) buildState() *state.File {
	drained := b.operatorDrains()
	f := &state.File{Version: state.Version, Backends: map[string]state.Backend{}}
	b.mu.Lock()
	for _, s := range b.services {
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
	for _, s := range b.services {
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
	b.st.buildGen = b.st.weightsGen
	state.Prune(b.st.remembered, b.now(), RememberRemovedFor, MaxRemembered) // a long run without reloads ages them too
	for name, e := range b.st.remembered {
		f.Backends[name] = e
	}
	store, replay := b.st.store, b.st.replay
	b.mu.Unlock()
	if store != nil {
		replay = store.ReplayState() // outside b.mu: the push server calls keyFor under its own lock
	}
	if len(replay) > 0 {
		f.Replay = replay
	}
	return f
}

func (b *Balancer) operatorDrains() map[string]bool {
	out := map[string]bool{}
	for _, st := range b.pool.Snapshot(nil) {
		if st.OperatorDrain {
			out[st.Name] = true
		}
	}
	return out
}

// saveState writes the state file if its content changed since the last write. A failure is
// logged once (and again when writes work again) and counted; it never stops the controller.
func (b *Balancer) saveState() {
	p := &b.st
	if p.path == "" && b.elector == nil {
		return
	}
	p.wmu.Lock()
	defer p.wmu.Unlock()
	f := b.buildState()
	cmp, err := state.Encode(f)
	now := b.now()
	if err == nil && bytes.Equal(cmp, p.last) {
		p.lastAt = now
		b.markSaved()
		return
	}
	if err == nil && b.elector != nil {
		f.Written = now.UTC()
		var data []byte
		if data, err = state.Encode(f); err == nil {
			var ok bool
			if ok, err = b.saveShared(data); !ok && err == nil {
				b.markSaved()
				return // a standby writes nothing; the leader's document stands
			}
		}
	} else if err == nil {
		f.Written = now.UTC()
		err = state.Save(p.path, f)
	}
	if err != nil {
		b.metrics.stateWrites.WithLabelValues("error").Inc()
		if !p.failing {
			b.log.Warn("state file not written; operator drains and learned capacity will not survive a restart until it is",
				"file", p.path, "err", err)
			b.events.add(Event{Time: now, Kind: "error", Text: "state file not written: " + err.Error()})
		}
		p.failing = true
		return
	}
	b.metrics.stateWrites.WithLabelValues("ok").Inc()
	b.markSaved()
	if p.failing {
		b.log.Info("state file written again", "file", p.path)
	}
	p.failing, p.last, p.lastAt = false, cmp, now
}

// markSaved records that the weights of the last buildState need no further write.
func (b *Balancer) markSaved() {
	b.mu.Lock()
	b.st.savedGen = b.st.buildGen
	b.mu.Unlock()
}

// maybeSaveState is the periodic write: of learned capacity at most once per StateEvery, of
// newly applied weights at the period after they were applied.
func (b *Balancer) maybeSaveState() {
	p := &b.st
	if p.path == "" && b.elector == nil {
		return
	}
	b.mu.Lock()
	moved := p.weightsGen != p.savedGen
	b.mu.Unlock()
	p.wmu.Lock()
	due := moved || b.now().Sub(p.lastAt) >= p.every
	p.wmu.Unlock()
	if due {
		b.saveState()
	}
}

// attachReplay hands the loaded replay marks to the push server once it exists.
func (b *Balancer) attachReplay(srv *push.Server) {
	rs := replayStoreOf(srv, b.log)
	b.mu.Lock()
	loaded := b.st.replay
	b.st.store = rs
	b.mu.Unlock()
	if len(loaded) > 0 {
		rs.RestoreReplayState(loaded)
	}
}
