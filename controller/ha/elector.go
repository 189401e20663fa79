package ha

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// ErrNotLeader is returned by SaveState when this controller does not lead
// (locally, or the fencing transaction found another leader key).
var ErrNotLeader = errors.New("ha: not the leader")

// ErrClosed is returned by Run after Close.
var ErrClosed = errors.New("ha: elector closed")

// Leadership is an immutable snapshot of what this controller knows about
// the election.
type Leadership struct {
	// Leader: this controller leads, and ValidUntil was in the future when
	// the snapshot was taken.
	Leader bool
	// Term is the generation id: the create revision of the current
	// leader's key (0: no leader known). It strictly increases from one
	// leader to the next.
	Term uint64
	// LeaderName is the current leader's Config.Name ("" if none known).
	LeaderName string
	// TTL is the granted lease TTL of our session (0 before the first grant).
	TTL time.Duration
	// ValidUntil (Leader only) is a conservative local bound on our lease:
	// the send time of the last confirmed keepalive + TTL - margin. Past it
	// this controller must not write.
	ValidUntil time.Time
	// Err says why we are not campaigning or not connected, e.g.
	// "configuration differs from leader c2's (fingerprint ab12 vs cd34)".
	Err string
}

func (a Leadership) sameNotice(b Leadership) bool {
	return a.Leader == b.Leader && a.Term == b.Term && a.LeaderName == b.LeaderName && a.TTL == b.TTL && a.Err == b.Err
}

// candidate is the campaign value: who campaigns and with which configuration.
type candidate struct {
	Name        string `json:"name"`
	Fingerprint string `json:"fingerprint"`
}

// Elector campaigns for leadership and holds the shared state's keys.
type Elector struct {
	cfg    Config
	log    *slog.Logger
	client *clientv3.Client

	electionPrefix, drainPrefix, stateKey string
	value                                 string

	mu        sync.Mutex
	cur       Leadership
	leaderKey string // our election key while we lead
	// verifying: a Verify check runs; verifyAgain is the claim to check after it.
	verifying   bool
	verifyAgain verifyRequest
	stale       []clientv3.LeaseID // leases of lost sessions, revoked best-effort
	changes     chan struct{}

	stepDown  chan uint64
	newFP     chan string // SetFingerprint's latest, taken by the session loop
	closed    chan struct{}
	closeOnce sync.Once
	running   atomic.Bool
	runDone   chan struct{}
}

// New validates cfg, connects and checks that the cluster answers (a Status
// of every endpoint and a Get, bounded by DialTimeout). Errors name the
// endpoint and the cause: unreachable, TLS handshake failure, auth failure,
// bad URL.
func New(ctx context.Context, cfg Config) (*Elector, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	if err := probe(ctx, cfg); err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            cfg.Endpoints,
		DialTimeout:          cfg.DialTimeout,
		DialKeepAliveTime:    cfg.LeaseTTL,
		DialKeepAliveTimeout: cfg.LeaseTTL,
		TLS:                  cfg.TLS,
		Username:             cfg.Username,
		Password:             cfg.Password,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("ha: etcd %s: %s", strings.Join(cfg.Endpoints, ","), classify(err))
	}
	if err := check(ctx, cli, cfg.Endpoints, cfg.Prefix, cfg.Logger); err != nil {
		cli.Close()
		return nil, err
	}
	val, _ := json.Marshal(candidate{Name: cfg.Name, Fingerprint: cfg.Fingerprint})
	e := &Elector{
		cfg:            cfg,
		log:            cfg.Logger.With("ha", cfg.Name),
		client:         cli,
		electionPrefix: cfg.Prefix + "/leader",
		drainPrefix:    cfg.Prefix + "/drain/",
		stateKey:       cfg.Prefix + "/state",
		value:          string(val),
		changes:        make(chan struct{}, 1),
		stepDown:       make(chan uint64, 1),
		newFP:          make(chan string, 1),
		closed:         make(chan struct{}),
		runDone:        make(chan struct{}),
	}
	return e, nil
}

// probe dials every endpoint (and shakes hands for https://) itself: the
// etcd client reports only "context deadline exceeded" for a refused
// connection or a failed handshake. It fails only if no endpoint answers,
// since a cluster with a member down still serves.
func probe(ctx context.Context, cfg Config) error {
	errs := make([]error, len(cfg.Endpoints))
	var wg sync.WaitGroup
	for i, ep := range cfg.Endpoints {
		wg.Add(1)
		go func() {
			defer wg.Done()
			u, _ := url.Parse(ep) // validated
			var d net.Dialer
			conn, err := d.DialContext(ctx, "tcp", u.Host)
			if err != nil {
				errs[i] = fmt.Errorf("etcd %s: unreachable: %v", ep, err)
				return
			}
			defer conn.Close()
			if u.Scheme != "https" {
				return
			}
			tc := cfg.TLS.Clone()
			if tc.ServerName == "" {
				tc.ServerName = u.Hostname()
			}
			tc.NextProtos = []string{"h2"}
			tconn := tls.Client(conn, tc)
			if err := tconn.HandshakeContext(ctx); err != nil {
				errs[i] = fmt.Errorf("etcd %s: TLS handshake failure: %v", ep, err)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err == nil {
			return nil
		}
	}
	return fmt.Errorf("ha: %w", errors.Join(errs...))
}

// check asks every endpoint for its status and the cluster for a key: New
// fails only if no endpoint answers or the read fails.
func check(ctx context.Context, cli *clientv3.Client, eps []string, prefix string, log *slog.Logger) error {
	errs := make([]error, len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := cli.Status(ctx, ep); err != nil {
				errs[i] = fmt.Errorf("etcd %s: %s", ep, classify(err))
			}
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
		} else {
			log.Warn("etcd endpoint does not answer", "err", err)
		}
	}
	if ok == 0 {
		return fmt.Errorf("ha: %w", errors.Join(errs...))
	}
	if _, err := cli.Get(ctx, prefix+"/leader", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil {
		return fmt.Errorf("ha: etcd %s: read %s: %s", strings.Join(eps, ","), prefix, classify(err))
	}
	return nil
}

// classify turns a client error into "CAUSE: DETAIL" with CAUSE one of
// unreachable, TLS handshake failure, auth failure.
func classify(err error) string {
	s := err.Error()
	l := strings.ToLower(s)
	switch {
	case errors.Is(err, rpctypes.ErrAuthFailed), errors.Is(err, rpctypes.ErrPermissionDenied),
		errors.Is(err, rpctypes.ErrUserEmpty), errors.Is(err, rpctypes.ErrInvalidAuthToken),
		strings.Contains(l, "authentication failed"), strings.Contains(l, "permission denied"),
		strings.Contains(l, "user name is empty"):
		return "auth failure: " + s
	case strings.Contains(l, "tls"), strings.Contains(l, "x509"), strings.Contains(l, "handshake"):
		return "TLS handshake failure: " + s
	default:
		return "unreachable: " + s
	}
}

// Current returns the latest snapshot. Leader is true only while
// Now() < ValidUntil.
func (e *Elector) Current() Leadership {
	e.mu.Lock()
	c := e.cur
	e.mu.Unlock()
	if c.Leader && !e.cfg.Now().Before(c.ValidUntil) {
		c.Leader = false
	}
	return c
}

// Changes is poked (capacity 1, never blocks the Elector) on every change
// of Current: leader gained or lost, term, leader name, TTL, Err. ValidUntil
// extensions do not poke it.
func (e *Elector) Changes() <-chan struct{} { return e.changes }

// Leading returns our term and true only if we lead and Now() < ValidUntil.
// Callers check it right before each switch write.
func (e *Elector) Leading() (term uint64, ok bool) {
	c := e.Current()
	if !c.Leader {
		return 0, false
	}
	return c.Term, true
}

// StepDown gives up the session (resign, revoke the lease) and campaigns
// again, if we still lead in term. Otherwise it does nothing. It does not
// block. A switch's claim that another controller is master goes to Verify,
// which calls StepDown only when etcd confirms a newer leader.
func (e *Elector) StepDown(term uint64, reason string) {
	c := e.Current()
	if !c.Leader || c.Term != term {
		e.log.Info("step down ignored: not leading in that term", "term", term, "current", c.Term, "leader", c.Leader, "reason", reason)
		return
	}
	e.log.Warn("stepping down", "term", term, "reason", reason)
	select {
	case e.stepDown <- term:
	default:
	}
}

// SetFingerprint replaces the configuration fingerprint after a reload. The session loop
// rewrites our election key's value (keeping its revision, so a leader keeps its term) and
// judges the current leader again: during a rolling reload, controllers that reloaded and
// those that did not refuse to take over from each other until they agree again.
func (e *Elector) SetFingerprint(fp string) {
	for {
		select {
		case e.newFP <- fp:
			return
		default:
		}
		select {
		case <-e.newFP: // an older one nobody took yet
		default:
		}
	}
}

// Close stops Run (which resigns, so another controller takes over at
// once), waits for it up to DialTimeout, and closes the etcd client.
func (e *Elector) Close() error {
	e.closeOnce.Do(func() { close(e.closed) })
	if e.running.Load() {
		select {
		case <-e.runDone:
		case <-time.After(2 * e.cfg.DialTimeout):
		}
	}
	err := e.client.Close()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

func (e *Elector) update(f func(*Leadership)) {
	e.mu.Lock()
	old := e.cur
	f(&e.cur)
	if !e.cur.Leader {
		e.cur.ValidUntil = time.Time{}
	}
	now := e.cur
	e.mu.Unlock()
	if !old.sameNotice(now) {
		e.log.Debug("leadership", "leader", now.Leader, "term", now.Term, "leader_name", now.LeaderName, "ttl", now.TTL, "err", now.Err)
		select {
		case e.changes <- struct{}{}:
		default:
		}
	}
}

func (e *Elector) addStale(id clientv3.LeaseID) {
	e.mu.Lock()
	e.stale = append(e.stale, id)
	e.mu.Unlock()
}

// revokeStale revokes the leases of lost sessions (best-effort: a lease
// that expired meanwhile is gone anyway), so a key does not linger when
// etcd comes back before the lease runs out.
func (e *Elector) revokeStale(ctx context.Context) {
	e.mu.Lock()
	ids := e.stale
	e.stale = nil
	e.mu.Unlock()
	for _, id := range ids {
		rctx, cancel := context.WithTimeout(ctx, e.cfg.DialTimeout)
		_, err := e.client.Revoke(rctx, id)
		cancel()
		switch {
		case err == nil:
			e.log.Info("revoked the lease of a lost session", "lease", fmt.Sprintf("%x", int64(id)))
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
		default:
			e.log.Debug("revoke of a lost session's lease failed", "lease", fmt.Sprintf("%x", int64(id)), "err", err)
			if ctx.Err() == nil {
				e.addStale(id)
			}
		}
	}
}

// margin is subtracted from the lease's end in ValidUntil: it covers clock
// rate differences and a write already on its way to a switch.
func margin(ttl time.Duration) time.Duration {
	return max(ttl/10, 50*time.Millisecond)
}
