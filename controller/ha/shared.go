package ha

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// SetDrain marks backend drained (put Prefix+"/drain/"+backend) or not
// (delete it). Any controller may call it, leader or not: the drain set is
// shared, so it cannot fork between controllers.
func (e *Elector) SetDrain(ctx context.Context, backend string, drained bool) error {
	if backend == "" || strings.ContainsAny(backend, "\n") {
		return fmt.Errorf("ha: drain: backend %q: want a non-empty name", backend)
	}
	key := e.drainPrefix + backend
	var err error
	if drained {
		_, err = e.client.Put(ctx, key, "1")
	} else {
		_, err = e.client.Delete(ctx, key)
	}
	if err != nil {
		return fmt.Errorf("ha: drain %s: %w", backend, err)
	}
	return nil
}

// WatchDrains calls apply with the full drain set (backend → true) at start
// and after every change: a Get, then a Watch from the Get's revision; after
// a compaction, a watch error or a lost etcd leader it starts over with a
// Get. apply runs on WatchDrains' goroutine and gets a map of its own. It
// returns nil when ctx ends.
func (e *Elector) WatchDrains(ctx context.Context, apply func(map[string]bool)) error {
	for ctx.Err() == nil {
		resp, err := e.client.Get(ctx, e.drainPrefix, clientv3.WithPrefix())
		if err != nil {
			if ctx.Err() == nil {
				e.log.Debug("drain read failed", "err", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		set := map[string]bool{}
		for _, kv := range resp.Kvs {
			set[strings.TrimPrefix(string(kv.Key), e.drainPrefix)] = true
		}
		apply(maps.Clone(set))
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wch := e.client.Watch(wctx, e.drainPrefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
		for wr := range wch {
			if err := wr.Err(); err != nil {
				if ctx.Err() == nil {
					e.log.Info("drain watch restarts", "err", err)
				}
				break
			}
			if len(wr.Events) == 0 {
				continue
			}
			for _, ev := range wr.Events {
				b := strings.TrimPrefix(string(ev.Kv.Key), e.drainPrefix)
				if ev.Type == clientv3.EventTypeDelete {
					delete(set, b)
				} else {
					set[b] = true
				}
			}
			apply(maps.Clone(set))
		}
		cancel()
	}
	return nil
}

// SaveState stores doc at Prefix+"/state" if we lead: locally (Leading) and
// in etcd, fenced by a transaction that succeeds only while our leader key
// exists with our term as its create revision. Otherwise ErrNotLeader.
func (e *Elector) SaveState(ctx context.Context, doc []byte) error {
	term, ok := e.Leading()
	if !ok {
		return ErrNotLeader
	}
	e.mu.Lock()
	key := e.leaderKey
	e.mu.Unlock()
	if key == "" {
		return ErrNotLeader
	}
	resp, err := e.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", int64(term))).
		Then(clientv3.OpPut(e.stateKey, string(doc))).
		Commit()
	if err != nil {
		return fmt.Errorf("ha: save state: %w", err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: leader key %s of term %d is gone", ErrNotLeader, key, term)
	}
	return nil
}

// LoadState returns the document last saved by a leader, or nil, nil.
func (e *Elector) LoadState(ctx context.Context) ([]byte, error) {
	resp, err := e.client.Get(ctx, e.stateKey)
	if err != nil {
		return nil, fmt.Errorf("ha: load state: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	return resp.Kvs[0].Value, nil
}
