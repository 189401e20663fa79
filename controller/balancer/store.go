package balancer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"flowweight/controller/state"
)

// Store keeps what must outlive this process (state.File: operator drains, learned capacity,
// the last weights written, the push protocol's replay marks). There are two: the state file
// of a controller alone (fileStore) and the shared document in etcd of a pool of controllers
// (etcdStore, docs/ha.md). New picks one; nothing else in the balancer asks which.
type Store interface {
	// Load returns the saved document, checked by state.Decode (nil, nil: nothing saved yet).
	// An error means the document is unusable; nothing of it is applied.
	Load(ctx context.Context) (*state.File, error)
	// Save writes f. ok false with no error: not written, and rightly so (a standby's
	// learning is its own until it takes over).
	Save(ctx context.Context, f *state.File) (ok bool, err error)
	// SetDrain stores one operator drain before the pool applies it. Where drains travel in
	// the document itself (the file), there is nothing to do.
	SetDrain(ctx context.Context, backend string, drained bool) error
	// WatchDrains calls apply with every drain set the store holds until ctx ends; it returns
	// at once where drains travel in the document.
	WatchDrains(ctx context.Context, apply func(map[string]bool)) error
	// Where names the store for logs and the start-up seed's source ("state file", "state in
	// etcd"), and its path ("" for etcd, or for a file store that keeps nothing).
	Where() (kind, path string)
}

// fileStore is the state file (controller/state owns its format). An empty path keeps
// nothing: Load finds nothing and Save writes nothing.
type fileStore struct{ path string }

func (s fileStore) Where() (string, string) { return seedFromState, s.path }

// Load reads the file. A missing file is a first start; an unusable one is moved aside whole
// (state.Quarantine), and the error says where it went.
func (s fileStore) Load(context.Context) (*state.File, error) {
	if s.path == "" {
		return nil, nil
	}
	f, err := state.Load(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		aside, qerr := state.Quarantine(s.path)
		if qerr != nil {
			return nil, fmt.Errorf("%w (not moved aside: %v)", err, qerr)
		}
		return nil, fmt.Errorf("%w (kept as %s)", err, aside)
	}
	return f, nil
}

func (s fileStore) Save(_ context.Context, f *state.File) (bool, error) {
	if s.path == "" {
		return false, nil
	}
	return true, state.Save(s.path, f)
}

func (fileStore) SetDrain(context.Context, string, bool) error { return nil }

func (fileStore) WatchDrains(context.Context, func(map[string]bool)) error { return nil }

// etcdStore is the pool's shared document and drain keys in etcd, through the election: only
// the leader writes the document, and its writes are fenced by its lease (ha.Elector).
type etcdStore struct{ e Elector }

func (etcdStore) Where() (string, string) { return seedFromEtcd, "" }

// Load reads the leader's last document. Drains are not taken from it: they have keys of
// their own (WatchDrains).
func (s etcdStore) Load(ctx context.Context) (*state.File, error) {
	data, err := s.e.LoadState(ctx)
	if err != nil || data == nil {
		return nil, err
	}
	f, err := state.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("state document in etcd: %w", err)
	}
	for name, e := range f.Backends {
		e.OperatorDrain = false
		f.Backends[name] = e
	}
	return f, nil
}

// Save writes the document if this controller leads. A write the fence refused because we
// were deposed meanwhile is not an error: the new leader's document stands.
func (s etcdStore) Save(ctx context.Context, f *state.File) (bool, error) {
	if _, ok := s.e.Leading(); !ok {
		return false, nil
	}
	data, err := state.Encode(f)
	if err != nil {
		return false, err
	}
	if err := s.e.SaveState(ctx, data); err != nil {
		if _, ok := s.e.Leading(); !ok {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

func (s etcdStore) SetDrain(ctx context.Context, backend string, drained bool) error {
	if err := s.e.SetDrain(ctx, backend, drained); err != nil {
		return fmt.Errorf("drain of %q not stored in etcd, so not made (every controller must see it): %w", backend, err)
	}
	return nil
}

func (s etcdStore) WatchDrains(ctx context.Context, apply func(map[string]bool)) error {
	return s.e.WatchDrains(ctx, apply)
}
