package ha

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

var errStepDown = errors.New("stepped down")

// Run campaigns until ctx ends or Close: it grants a lease, opens a session
// on it, and campaigns unless the current leader's fingerprint differs from
// ours. When the session is lost (lease expired, etcd unreachable past
// ValidUntil, our key gone) or after StepDown, it starts a new session and
// campaigns again. When ctx ends it resigns and revokes the lease, so a
// clean shutdown hands over at once, and returns nil (ErrClosed after
// Close). Run may be called once.
func (e *Elector) Run(ctx context.Context) error {
	if !e.running.CompareAndSwap(false, true) {
		return errors.New("ha: Run called twice")
	}
	defer close(e.runDone)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-e.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	backoff := 50 * time.Millisecond
	for {
		start := time.Now()
		err := e.runSession(ctx)
		if ctx.Err() != nil {
			e.update(func(l *Leadership) { *l = Leadership{TTL: l.TTL, Err: "stopped"} })
			select {
			case <-e.closed:
				return ErrClosed
			default:
				return nil
			}
		}
		e.log.Warn("election session ended", "err", err)
		e.update(func(l *Leadership) { *l = Leadership{TTL: l.TTL, Err: err.Error()} })
		if errors.Is(err, errStepDown) {
			continue
		}
		if time.Since(start) > 10*time.Second {
			backoff = 50 * time.Millisecond
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
		}
		backoff = min(2*backoff, time.Second)
	}
}

// leaderInfo is what the observer saw: the first key of the election.
type leaderInfo struct {
	key       string // "" no leader
	rev       int64
	candidate candidate
}

// session is one lease and its campaign.
type session struct {
	mu         sync.Mutex
	validUntil time.Time // the lease's conservative local end
	lost       error
}

func (s *session) extend(t time.Time) {
	s.mu.Lock()
	if t.After(s.validUntil) {
		s.validUntil = t
	}
	s.mu.Unlock()
}

func (s *session) valid() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.validUntil
}

func (e *Elector) runSession(ctx context.Context) (err error) {
	e.revokeStale(ctx)
	defer func() {
		e.mu.Lock()
		e.leaderKey = ""
		e.mu.Unlock()
	}()
	ttlSec := int64(e.cfg.LeaseTTL / time.Second)
	sent := e.cfg.Now()
	gctx, gcancel := context.WithTimeout(ctx, e.cfg.DialTimeout)
	grant, err := e.client.Grant(gctx, ttlSec)
	gcancel()
	if err != nil {
		return fmt.Errorf("etcd unreachable: grant lease: %v", err)
	}
	ttl := time.Duration(grant.TTL) * time.Second
	lease := grant.ID
	if grant.TTL != ttlSec {
		e.log.Info("etcd granted a longer lease TTL than asked", "asked", e.cfg.LeaseTTL, "granted", ttl)
	}
	s := &session{validUntil: sent.Add(ttl - margin(ttl))}
	e.update(func(l *Leadership) { l.TTL = ttl })

	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	sess, err := concurrency.NewSession(e.client, concurrency.WithLease(lease),
		concurrency.WithTTL(int(grant.TTL)), concurrency.WithContext(sctx))
	if err != nil {
		e.addStale(lease)
		return fmt.Errorf("etcd unreachable: keep lease alive: %v", err)
	}
	el := concurrency.NewElection(sess, e.electionPrefix)
	myKey := fmt.Sprintf("%s/%x", e.electionPrefix, int64(lease))

	var wg sync.WaitGroup
	defer wg.Wait()
	resign := false
	defer func() {
		scancel()
		sess.Orphan()
		if ctx.Err() != nil || resign {
			// Clean end: hand over at once. The parent context is gone,
			// so these get their own deadline.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.DialTimeout)
			if _, derr := e.client.Delete(rctx, myKey); derr != nil {
				e.log.Debug("resign failed", "err", derr)
			}
			if _, rerr := e.client.Revoke(rctx, lease); rerr != nil && !errors.Is(rerr, rpctypes.ErrLeaseNotFound) {
				e.log.Debug("revoke failed", "err", rerr)
				e.addStale(lease)
			}
			cancel()
			e.log.Info("resigned", "lease", fmt.Sprintf("%x", int64(lease)))
			return
		}
		e.addStale(lease)
	}()

	// Keepalive tracker: the session's own keepalive keeps the lease; this
	// one measures. The lease's server-side end is at least the send time
	// of a confirmed keepalive + TTL, so ValidUntil never overstates it.
	lostc := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		every := max(ttl/4, 50*time.Millisecond)
		for {
			t0 := e.cfg.Now()
			kctx, cancel := context.WithTimeout(sctx, ttl/2)
			resp, err := e.client.KeepAliveOnce(kctx, lease)
			cancel()
			switch {
			case err == nil:
				s.extend(t0.Add(time.Duration(resp.TTL)*time.Second - margin(ttl)))
			case errors.Is(err, rpctypes.ErrLeaseNotFound):
				select {
				case lostc <- errors.New("lease expired"):
				default:
				}
				return
			}
			select {
			case <-sctx.Done():
				return
			case <-time.After(every):
			}
		}
	}()

	// Observer: the election's first key, at start and after every change.
	obsc := make(chan leaderInfo, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		e.observe(sctx, obsc)
	}()

	var (
		info         leaderInfo
		leading      bool
		term         int64
		wantCampaign bool               // the latest leader allows us to campaign
		outstanding  bool               // a Campaign call runs (at most one at a time)
		campc                           = make(chan error, 1)
		ccancel      context.CancelFunc = func() {}
	)
	defer func() { ccancel() }()
	// judge decides from the latest leader whether we may campaign, withdrawing our key
	// when a leader with another configuration appeared.
	judge := func() error {
		mismatch := info.key != "" && info.key != myKey && info.candidate.Fingerprint != e.cfg.Fingerprint
		msg := ""
		if mismatch {
			msg = fmt.Sprintf("configuration differs from leader %s's (fingerprint %s vs %s)",
				info.candidate.Name, short(e.cfg.Fingerprint), short(info.candidate.Fingerprint))
		}
		e.update(func(l *Leadership) {
			l.Leader = false
			l.Term = uint64(info.rev)
			l.LeaderName = info.candidate.Name
			l.Err = msg
		})
		if mismatch && wantCampaign {
			e.log.Warn("withdrawing from the election", "why", msg)
			ccancel()
			dctx, cancel := context.WithTimeout(sctx, e.cfg.DialTimeout)
			_, derr := e.client.Delete(dctx, myKey)
			cancel()
			if derr != nil {
				return fmt.Errorf("etcd unreachable: withdraw: %v", derr)
			}
		}
		if mismatch {
			e.log.Info("not campaigning", "why", msg)
		}
		wantCampaign = !mismatch
		return nil
	}
	maybeCampaign := func() {
		if !wantCampaign || outstanding || leading {
			return
		}
		var cctx context.Context
		cctx, ccancel = context.WithCancel(sctx)
		outstanding = true
		val := e.value
		wg.Add(1)
		go func() {
			defer wg.Done()
			campc <- el.Campaign(cctx, val)
		}()
	}
	check := time.NewTicker(max(ttl/10, 20*time.Millisecond))
	defer check.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sess.Done():
			return errors.New("etcd unreachable: lease keepalive stopped")
		case err := <-lostc:
			return err
		case t := <-e.stepDown:
			if leading && uint64(term) == t {
				resign = true
				return errStepDown
			}
		case <-check.C:
			if v := s.valid(); leading && !e.cfg.Now().Before(v) {
				// The time says when this controller stopped writing: its switch writes all
				// precede it (docs/ha.md, "ValidUntil").
				return fmt.Errorf("etcd unreachable: lease not confirmed before ValidUntil %s", v.Format("15:04:05.000"))
			}
			if leading {
				v := s.valid()
				e.update(func(l *Leadership) { l.ValidUntil = v })
			}
		case err := <-campc:
			outstanding = false
			if err != nil || !wantCampaign {
				if err != nil && sctx.Err() == nil && wantCampaign && !errors.Is(err, context.Canceled) {
					return fmt.Errorf("etcd unreachable: campaign: %v", err)
				}
				if err == nil {
					// Elected just as we withdrew: give the key back.
					dctx, cancel := context.WithTimeout(sctx, e.cfg.DialTimeout)
					_, derr := e.client.Delete(dctx, myKey)
					cancel()
					if derr != nil {
						return fmt.Errorf("etcd unreachable: withdraw: %v", derr)
					}
				}
				maybeCampaign()
				continue
			}
			leading, term = true, el.Rev()
			v := s.valid()
			e.log.Info("elected leader", "term", term, "ttl", ttl, "valid_until", v)
			e.mu.Lock()
			e.leaderKey = myKey
			e.mu.Unlock()
			e.update(func(l *Leadership) {
				*l = Leadership{Leader: true, Term: uint64(term), LeaderName: e.cfg.Name, TTL: ttl, ValidUntil: v}
			})
		case info = <-obsc:
			if leading {
				if info.key != myKey {
					return fmt.Errorf("lost leadership: leader key is now %q", info.key)
				}
				continue
			}
			if err := judge(); err != nil {
				return err
			}
			maybeCampaign()
		case fp := <-e.newFP:
			if fp == e.cfg.Fingerprint {
				continue
			}
			e.log.Info("configuration fingerprint changed", "from", short(e.cfg.Fingerprint), "to", short(fp))
			e.cfg.Fingerprint = fp
			val, _ := json.Marshal(candidate{Name: e.cfg.Name, Fingerprint: fp})
			e.value = string(val)
			if leading || outstanding {
				// Our key exists (we lead or wait in line): rewrite its value in place, on
				// the same lease, so its create revision (our term) stays.
				pctx, cancel := context.WithTimeout(sctx, e.cfg.DialTimeout)
				_, perr := e.client.Put(pctx, myKey, e.value, clientv3.WithLease(lease))
				cancel()
				if perr != nil {
					e.log.Warn("election value not rewritten after a reload", "err", perr)
				}
			}
			if !leading {
				if err := judge(); err != nil {
					return err
				}
				maybeCampaign()
			}
		}
	}
}

func short(fp string) string {
	if len(fp) > 12 {
		return fp[:12]
	}
	return fp
}

// observe sends the election's first key (or none) at start and after each
// change of the election prefix, newest value only. A watch error or a
// compaction leads to a fresh Get.
func (e *Elector) observe(ctx context.Context, out chan leaderInfo) {
	send := func(li leaderInfo) {
		select {
		case <-out:
		default:
		}
		out <- li
	}
	for ctx.Err() == nil {
		var li leaderInfo
		resp, err := e.client.Get(ctx, e.electionPrefix+"/", clientv3.WithFirstCreate()...)
		var rev int64
		if err == nil {
			rev = resp.Header.Revision
			if len(resp.Kvs) > 0 {
				kv := resp.Kvs[0]
				li.key, li.rev = string(kv.Key), kv.CreateRevision
				if jerr := json.Unmarshal(kv.Value, &li.candidate); jerr != nil {
					li.candidate = candidate{Name: string(kv.Value)}
				}
			}
		}
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		send(li)
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wch := e.client.Watch(wctx, e.electionPrefix+"/", clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		for wr := range wch {
			if wr.Err() != nil || len(wr.Events) > 0 || wr.Canceled {
				break
			}
		}
		cancel()
	}
}
