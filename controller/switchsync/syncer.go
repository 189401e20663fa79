package switchsync

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"flowweight/controller/dataplane"
	"flowweight/controller/intent"
	"flowweight/controller/ofswitch"

	"github.com/netrack/openflow/ofp"
	"github.com/prometheus/client_golang/prometheus"
)

// Conn is the OpenFlow session a Syncer drives: an *ofswitch.Switch, or a fake in tests.
type Conn interface {
	DatapathID() uint64
	String() string
	Multipart(ctx context.Context, typ ofp.MultipartType, body io.WriterTo) ([]byte, error)
	Apply(ctx context.Context, stages ...[]ofswitch.Message) (ofswitch.Result, error)
	// PacketOut sends one frame out of the switch (ARP/ND requests and replies).
	PacketOut(ctx context.Context, inPort uint32, actions ofp.Actions, frame []byte) error
	Done() <-chan struct{}
	// RequestRole, Role and RoleChanged are the switch's controller roles (HA): the role it
	// last confirmed, and a poke when it tells us ours changed.
	RequestRole(ctx context.Context, role ofp.ControllerRole, gen uint64) (ofswitch.RoleReply, error)
	Role() ofswitch.RoleReply
	RoleChanged() <-chan struct{}
}

// Lead is the controllers' election as a syncer sees it (docs/ha.md). With a Lead, a syncer
// writes only in a term it leads, after the switch confirmed it MASTER with that term as the
// generation id; otherwise it holds SLAVE and only reads. The switch is the fence: a deposed
// leader's role request is stale and its writes are refused, whatever it believes.
type Lead interface {
	// Leading is the term this controller may write in; it is asked right before each write.
	Leading() (term uint64, ok bool)
	// Term is the current leader's term as observed (0: none known yet): a standby's SLAVE
	// request carries it, since the switch refuses a generation id older than it has seen.
	Term() uint64
	// Contested says a switch claimed, in term, that another controller holds it: a stale
	// role reply, a role status making us SLAVE, an IS_SLAVE error. A switch's word concerns
	// that switch only, and over plain TCP anyone can claim to be a switch, so the syncer only
	// stops writing to it; the election (etcd) decides whether a newer leader exists and this
	// controller must step down (docs/ha.md, "Deposed"). It must not block.
	Contested(term uint64, reason string)
}

// Reasons a switch contested our MASTER role (Metrics.Contested's label values).
const (
	ContestStale     = "stale_role"  // our MASTER request was refused as stale
	ContestStatus    = "role_status" // the switch said another controller became master
	ContestIsSlave   = "is_slave"    // a write was refused as from a slave
	ContestOtherRole = "other_role"  // a MASTER request was answered with another role or term
)

// Metrics are the counters every syncer adds to (shared, so one series for the fleet); nil
// fields count nothing.
type Metrics struct {
	Rewrites, RewriteErrors, Drift prometheus.Counter
	BarrierRTT                     prometheus.Observer
	// Contested counts switches' claims that another controller is master, by reason
	// (ContestStale, ContestStatus, ContestIsSlave, ContestOtherRole).
	Contested *prometheus.CounterVec
}

// Upward is what a syncer tells the loop above it, and all it tells: it never reads the
// loop's state. Both are called from the syncer's goroutine (or a Neighbours timer) and must
// neither block nor wait on the loop's lock.
type Upward interface {
	// Kick asks for an update soon: a read-back found seeds the loop did not have
	// (Status.Seeds), or Neighbours located a backend.
	Kick()
	// Event records an operator-visible event about this switch (kind: rewrite, drift,
	// error, role, arp).
	Event(kind, service, text string)
}

type nopUp struct{}

func (nopUp) Kick()                        {}
func (nopUp) Event(string, string, string) {}

// Config is what a Syncer is given; everything else it learns from its switch and the
// intents.
type Config struct {
	Conn Conn
	// OVS is the switch's Open vSwitch version (DESC at connect): the slot table its groups
	// are laid out for.
	OVS    dataplane.OVSVersion
	Logger *slog.Logger
	Now    func() time.Time
	// Neighbours is where backends are (shared by the syncers): the syncer plans with its
	// locations, hands it the ones a read-back recovered (our own earlier writes, usable until
	// ARP answers), and sends this switch's ARP/ND requests and replies (arp.go). nil: backends
	// are located by the config alone, and the syncer sends no ARP.
	Neighbours *Neighbours
	// Up hears what the loop above needs to know; nil: nothing is told.
	Up    Upward
	Notes *Notes
	// Plans is the planner's output shared with the other syncers; nil plans alone.
	Plans   *Plans
	Metrics Metrics
	// Dispatch chooses the backends of reactive services' new connections (dispatch.go).
	Dispatch DispatchConfig
	// Lead is the election; nil without HA: this controller is the only one, writes without
	// asking for a role, and the switch keeps it EQUAL.
	Lead Lead
	// LeaseRefresh is how often leased flows are renewed (lease.go); 0 is
	// dataplane.LeaseRefresh, which the flows' hard timeout is sized for.
	LeaseRefresh time.Duration

	// locate, in this package's tests only, locates backends in place of Neighbours.
	locate Locator
}

// Status is what a syncer publishes after each step. Never modified once published.
type Status struct {
	DPID uint64
	OVS  dataplane.OVSVersion
	// Seq is the intent the switch was last brought to (0: none yet); Known reports whether
	// the syncer knows what the switch holds.
	Seq       uint64
	Known     bool
	LastApply time.Time
	LastRTT   time.Duration
	// Planned is the planner's input at the last plan, backends located as this switch
	// taught the controller: what the views lay out to show the realised split.
	Planned []dataplane.Service
	// Seeds are the weights the switch held at the last read-back for the services that
	// wanted them (intent.Service.WantSeed), by name.
	Seeds map[string][]uint16
	// Rates are bytes per second per flow cookie between the last two counter reads, taken
	// at RatesAt (zero: none).
	Rates   map[uint64]float64
	RatesAt time.Time
	// CountedAt is when the counters were last read (zero: never).
	CountedAt time.Time
	// Role is this controller's role on the switch as the switch last confirmed it ("equal"
	// without HA, "master" or "slave"); Term the generation id it was confirmed with.
	Role string
	Term uint64
	// Confirmed is when the switch first acknowledged a barrier from us as MASTER in Term
	// (zero: not yet): the takeover is complete on this switch.
	Confirmed time.Time
	// Measured is, per service placed on the switch, what its group's bucket counters
	// measured over the last MeasureWindow beside the planned shares, read at MeasuredAt
	// (measuring.go; nil before the first reading).
	Measured   map[string]Measured
	MeasuredAt time.Time
	// Corrections are, per service whose share this switch corrects (intent.Service's
	// CorrectShare with client affinity), the correction at the last reading (correct.go).
	Corrections map[string]Correction
	// Contested says why this switch claimed, in the term we lead, that another controller
	// is master ("": it did not): we do not write to it until its next read-back asks for
	// MASTER again, or the election moves on.
	Contested string
}

// Syncer keeps one switch in step with the latest intent. Create it with New and run it with
// Run; Offer and Status are safe from any goroutine.
type Syncer struct {
	cfg    Config
	latest atomic.Pointer[intent.Intent]
	wake   chan struct{}
	status atomic.Pointer[Status]
	// out carries the ARP/ND packet-outs PacketIn planned to Run's goroutine; stopped is
	// closed when Run ends.
	out     chan frameOut
	stopped chan struct{}

	// Owned by Run's goroutine.
	current    dataplane.State // what we believe the switch holds
	known      bool            // current was read back or applied since connect
	resync     bool            // read back before the next plan
	planned    uint64          // Gen of the intent current was planned from
	applied    map[string][]uint16
	counts     Counts
	countSeq   uint64
	countTimer *time.Timer
	st         Status
	// master is the term the switch confirmed us MASTER in (0: not master); slave the term
	// it confirmed us SLAVE in, and slaveOK whether it did.
	master  uint64
	slave   uint64
	slaveOK bool
	// contested is the term in which the switch claimed another controller is master (0:
	// none): no MASTER request or write to it in that term until the next read-back.
	contested uint64
	// newest is the newest term this syncer has seen confirmed (as master or slave): a SLAVE
	// request never carries less, since the switch refuses an older generation id.
	newest uint64

	// meas is the measured shares' state (measuring.go).
	meas measureState

	// affinity is the planner input last applied (nil: none since start), from which
	// AffinityEnds tells which backends' learned affinities to delete.
	affinity []dataplane.Service
	// base is the planner input of the last plan before corrections (the weights' computed
	// shares); corr the corrections in use, by service; replan asks for a plan at the next
	// step because a correction moved; appliedPlan the weights last applied with the
	// corrections (applied is without).
	base        []dataplane.Service
	corr        map[string]Correction
	replan      bool
	appliedPlan map[string][]uint16
	// renewFailing: the last lease renewal failed (its warning is logged once).
	renewFailing bool
}

// New makes a syncer for cfg.Conn; it does nothing until Run.
func New(cfg Config) *Syncer {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Up == nil {
		cfg.Up = nopUp{}
	}
	if cfg.LeaseRefresh <= 0 {
		cfg.LeaseRefresh = dataplane.LeaseRefresh
	}
	s := &Syncer{cfg: cfg, wake: make(chan struct{}, 1), resync: true, out: make(chan frameOut),
		stopped: make(chan struct{}), meas: newMeasureState()}
	if cfg.Conn != nil {
		s.st.DPID = cfg.Conn.DatapathID()
	}
	s.st.OVS = cfg.OVS
	s.st.Role = "equal"
	s.publish()
	return s
}

// OVS is the switch's version as read at connect.
func (s *Syncer) OVS() dataplane.OVSVersion { return s.cfg.OVS }

// Offer makes in the intent to plan from next, replacing any the syncer has not taken yet.
// It never blocks.
func (s *Syncer) Offer(in *intent.Intent) {
	s.latest.Store(in)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Status returns the latest published status.
func (s *Syncer) Status() *Status { return s.status.Load() }

func (s *Syncer) publish() {
	st := s.st
	s.status.Store(&st)
}

// Run syncs until ctx ends or the session does. Its goroutine is the only one that writes to
// the switch: syncs, role requests, lease renewals and the ARP/ND packet-outs.
func (s *Syncer) Run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer close(s.stopped)
	go func() {
		select {
		case <-s.cfg.Conn.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	var period time.Duration
	readback := time.NewTimer(time.Hour)
	readback.Stop()
	defer readback.Stop()
	s.countTimer = time.NewTimer(time.Hour)
	s.countTimer.Stop()
	defer s.countTimer.Stop()
	renewals := time.NewTicker(s.cfg.LeaseRefresh)
	defer renewals.Stop()
	for {
		repair := false
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-readback.C:
			repair = true
		case <-s.countTimer.C:
			if in := s.latest.Load(); in != nil {
				s.readCounters(ctx, in)
			}
			continue
		case o := <-s.out:
			s.send(ctx, o)
			continue
		case <-renewals.C:
			s.renew(ctx)
			continue
		case <-s.cfg.Conn.RoleChanged():
			s.roleChanged()
		}
		in := s.latest.Load()
		if in == nil {
			continue
		}
		if repair {
			s.repair(ctx, in)
		} else {
			s.step(ctx, in)
		}
		if ctx.Err() != nil {
			return
		}
		if s.known && (s.meas.rebase || s.measureDue()) {
			s.measure(ctx, in)
		}
		s.resolve(ctx, in) // this switch's ARP requests, after every intent taken
		if p := in.ReadbackPeriod; p > 0 && (p != period || repair) {
			period = p
			readback.Reset(p)
		}
	}
}

// step brings the switch to in when it is not there already, then reads counters if in asks.
func (s *Syncer) step(ctx context.Context, in *intent.Intent) {
	if !s.known || s.resync || s.planned != in.Gen || s.replan {
		s.sync(ctx, in)
	} else if s.st.Seq != in.Seq {
		s.st.Seq = in.Seq // nothing to plan: the switch holds this intent too
		s.publish()
	}
	if in.ReadCounters && in.Seq != s.countSeq {
		s.countSeq = in.Seq
		if d := counterOffset(s.cfg.Conn.DatapathID(), in.CounterSpread); d > 0 {
			s.countTimer.Reset(d)
		} else {
			s.readCounters(ctx, in)
		}
	}
}

// sync reads back first when we do not know what the switch holds, then plans, applies
// stage by stage with barriers, and records the result.
func (s *Syncer) sync(ctx context.Context, in *intent.Intent) {
	sw := s.cfg.Conn
	term, write := s.role(ctx)
	if s.resync || !s.known {
		cur, err := s.readBack(ctx, in)
		if err != nil {
			s.cfg.Logger.Warn("read-back failed", "dpid", sw.String(), "err", err)
			inc(s.cfg.Metrics.RewriteErrors)
			return
		}
		s.adopt(cur, in)
	}
	var desired dataplane.State
	shared := false
	s.replan = false
	base := Located(in, sw.DatapathID(), s.locate())
	svcs, corrected := s.applyCorrections(in, base)
	if s.cfg.Plans != nil && !corrected {
		desired, shared = s.cfg.Plans.DesiredOf(in, svcs, s.cfg.OVS)
	} else {
		// A corrected plan is this switch's alone, and changes with every correction step
		// within one generation: caching it would only grow the cache.
		desired = dataplane.Desired(svcs, Options(in, s.cfg.OVS))
	}
	s.base = base
	s.st.Planned = svcs
	if s.cfg.Notes != nil && !shared {
		// A shared plan's notes were noted by the syncer that planned it. The notes compare
		// the realised split with the computed weights: a correction's are not those.
		s.cfg.Notes.Note(base, Options(in, s.cfg.OVS))
	}
	// Only news asks for an update: the seeds stay the same while the hold lasts, and asking
	// on every sync would make every update ask for the next.
	if seeds := Seeds(in, s.cfg.Conn.DatapathID(), svcs, s.current); !maps.EqualFunc(seeds, s.st.Seeds, slices.Equal) {
		s.st.Seeds = seeds
		s.publish()
		if seeds != nil {
			s.cfg.Up.Kick()
		}
	}
	if !write {
		// A standby reads the switch back at every intent: its seeds then follow what the
		// leader wrote, and a takeover starts from the switch's weights. It is in step with
		// the intent in that sense (Role says the switch holds the leader's writes).
		s.resync = true
		s.st.Seq = in.Seq
		s.publish()
		return
	}
	desired = Hold(desired, s.current, in)
	desired = dataplane.KeepSlots(desired, s.current) // stateless: move only the slots that must
	plan := dataplane.Plan(desired, s.current)
	if ends := AffinityEnds(s.affinity, svcs); len(ends) > 0 {
		// Last: the groups and table-5 flows no longer send anyone to these backends, so
		// nothing learns them again after the delete.
		plan = append(plan, ends)
	}
	confirm := s.cfg.Lead != nil && s.st.Confirmed.IsZero()
	if len(plan) == 0 && confirm {
		// A new leader confirms by barrier that the switch takes its writes, even when the
		// switch already holds what it wants.
		plan = [][]ofswitch.Message{{}}
	}
	if len(plan) > 0 {
		// Close the counters' delta of the groups about to be rewritten (measuring.go); before
		// the lease check, which must stay next to the write.
		s.measureAroundWrite(ctx, in, desired)
	}
	if s.cfg.Lead != nil {
		if t, ok := s.cfg.Lead.Leading(); !ok || t != term {
			s.resync = true
			return // the lease ran out while we planned
		}
	}
	if len(plan) == 0 {
		s.planned, s.st.Seq, s.st.Known = in.Gen, in.Seq, true
		s.applied, s.appliedPlan = weightsOf(base), weightsOf(svcs)
		s.affinity = svcs
		s.publish()
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 2*in.BarrierTimeout*time.Duration(len(plan)+1))
	defer cancel()
	start := time.Now()
	res, err := sw.Apply(cctx, plan...)
	elapsed := time.Since(start)
	n := 0
	for _, stage := range plan {
		n += len(stage)
	}
	if err != nil {
		// Part of the plan may have been applied: read back before planning again.
		s.resync = true
		s.meas.rewriteAll(s.current)
		if s.cfg.Lead != nil && ofswitch.IsSlave(err) {
			s.st.Role = "slave"
			s.contest(term, ContestIsSlave, fmt.Sprintf("switch %s refused our write as from a slave", sw))
			return
		}
		inc(s.cfg.Metrics.RewriteErrors)
		s.cfg.Up.Event("error", "", fmt.Sprintf("switch %s: rewrite failed: %v", sw, err))
		s.cfg.Logger.Error("rewrite failed; will resync", "dpid", sw.String(), "messages", n, "err", err)
		return
	}
	s.setCurrent(desired)
	s.planned = in.Gen
	s.affinity = svcs
	if m := s.cfg.Metrics.BarrierRTT; m != nil {
		for _, d := range res.BarrierRTT {
			m.Observe(d.Seconds())
		}
	}
	if confirm {
		s.st.Confirmed = s.cfg.Now()
		s.cfg.Logger.Info("switch confirmed this controller as master", "dpid", sw.String(), "term", term,
			"messages", n, "barrier_rtt", elapsed.Round(time.Microsecond).String())
		s.cfg.Up.Event("role", "", fmt.Sprintf("switch %s: master in term %d, confirmed by barrier", sw, term))
	}
	inc(s.cfg.Metrics.Rewrites)
	s.logChanges(in, base, svcs, n, elapsed)
	s.st.Seq, s.st.Known, s.st.LastApply, s.st.LastRTT = in.Seq, true, s.cfg.Now(), elapsed
	s.publish()
}

// logChanges says what a successful apply changed: one line per service whose weights this
// switch had from us and that moved, else one line for the repair (or the first programming,
// which would otherwise be a line per service per switch at a fleet's connect).
func (s *Syncer) logChanges(in *intent.Intent, svcs, planned []dataplane.Service, n int, elapsed time.Duration) {
	sw := s.cfg.Conn
	now, nowPlanned := weightsOf(svcs), weightsOf(planned)
	rtt := elapsed.Round(time.Microsecond).String()
	changed := 0
	if s.applied != nil {
		for _, sv := range in.On(sw.DatapathID()) {
			before, had := s.applied[sv.Name]
			after := now[sv.Name]
			if had && slices.Equal(before, after) {
				continue
			}
			if !had {
				before = nil
			}
			changed++
			c := intent.Change{Names: names(sv), Before: before, After: after}
			s.cfg.Logger.Info("weights rewritten", "dpid", sw.String(), "service", sv.Name, "weights", c.String(),
				"messages", n, "barrier_rtt", rtt)
			s.cfg.Up.Event("rewrite", sv.Name, fmt.Sprintf("switch %s: %s (barrier %s)", sw, c.String(), rtt))
		}
	}
	switch {
	case s.applied == nil:
		s.cfg.Logger.Info("switch programmed", "dpid", sw.String(), "services", len(svcs), "messages", n, "barrier_rtt", rtt)
	case changed == 0 && !maps.EqualFunc(nowPlanned, s.appliedPlan, slices.Equal):
		// A correction's step (correcting.go logs when one starts and ends): debug.
		s.cfg.Logger.Debug("slots corrected", "dpid", sw.String(), "messages", n, "barrier_rtt", rtt)
	case changed == 0:
		s.cfg.Logger.Info("switch state repaired", "dpid", sw.String(), "messages", n, "barrier_rtt", rtt)
	}
	s.applied, s.appliedPlan = now, nowPlanned
}

func names(s *intent.Service) []string {
	out := make([]string, len(s.Backends))
	for i, b := range s.Backends {
		out[i] = b.Name
	}
	return out
}

// repair reads the switch back and, when it differs from what we applied, puts it right.
func (s *Syncer) repair(ctx context.Context, in *intent.Intent) {
	sw := s.cfg.Conn
	cur, err := s.readBack(ctx, in)
	if err != nil {
		s.cfg.Logger.Warn("read-back failed", "dpid", sw.String(), "err", err)
		return
	}
	// A standby's switch changes under it whenever the leader writes: that is not drift.
	standby := s.cfg.Lead != nil && s.master == 0
	if s.known && !standby && !cur.Equal(s.current) {
		inc(s.cfg.Metrics.Drift)
		s.cfg.Up.Event("drift", "", "switch "+sw.String()+": state differs from what was applied; repairing")
		s.cfg.Logger.Warn("drift detected; repairing", "dpid", sw.String(), "diff", diffSummary(s.current, cur))
	}
	s.adopt(cur, in)
	// A switch that contested our role is asked for MASTER again at each read-back: a claim
	// the election did not confirm may have been a switch's mistake, or a rogue's.
	s.contested = 0
	s.sync(ctx, in)
}

// adopt makes a read-back the current state and hands the backend locations it shows to the
// ARP learner: after a restart the learned table is empty, and planning without them would
// delete every backend's forwarding flows until ARP answers again.
func (s *Syncer) adopt(cur dataplane.State, in *intent.Intent) {
	s.setCurrent(cur)
	s.known, s.resync = true, false
	s.planned = 0
	s.st.Known = true
	if s.cfg.Neighbours == nil {
		return
	}
	locs := dataplane.Locations(cur)
	if len(locs) == 0 {
		return
	}
	for _, t := range in.ARP(s.cfg.Conn.DatapathID()) {
		if loc, ok := locs[t.IP]; ok {
			s.cfg.Neighbours.Adopt(s.cfg.Conn.DatapathID(), t.IP, loc)
		}
	}
}

// locate is where this switch's backends are, by Neighbours (nil: by the config alone).
func (s *Syncer) locate() Locator {
	if s.cfg.locate != nil || s.cfg.Neighbours == nil {
		return s.cfg.locate
	}
	return s.cfg.Neighbours.Locator(s.cfg.Conn.DatapathID())
}

// readBack asks the switch for its groups and for the flows carrying our cookie.
func (s *Syncer) readBack(ctx context.Context, in *intent.Intent) (dataplane.State, error) {
	sw := s.cfg.Conn
	cctx, cancel := context.WithTimeout(ctx, 2*in.BarrierTimeout)
	defer cancel()
	gbody, err := sw.Multipart(cctx, ofp.MultipartTypeGroupDescription, nil)
	if err != nil {
		return dataplane.State{}, fmt.Errorf("group description: %w", err)
	}
	groups, err := dataplane.DecodeGroupDesc(gbody)
	if err != nil {
		return dataplane.State{}, fmt.Errorf("group description: %w", err)
	}
	fbody, err := sw.Multipart(cctx, ofp.MultipartTypeFlow, dataplane.OwnFlowsRequest())
	if err != nil {
		return dataplane.State{}, fmt.Errorf("flow stats: %w", err)
	}
	flows, err := dataplane.DecodeFlowStats(fbody)
	if err != nil {
		return dataplane.State{}, fmt.Errorf("flow stats: %w", err)
	}
	// Learned affinity flows are the switch's own: neither drift nor ours to delete.
	return dataplane.State{Flows: flows, Groups: groups}.Canonical().WithoutLearned().FilterGroups(func(id uint32) bool { return in.Owned[id] }), nil
}

// readCounters reads our flows' byte counters and publishes the rates since the last read.
func (s *Syncer) readCounters(ctx context.Context, in *intent.Intent) {
	sw := s.cfg.Conn
	cctx, cancel := context.WithTimeout(ctx, in.BarrierTimeout)
	body, err := sw.Multipart(cctx, ofp.MultipartTypeFlow, dataplane.OwnFlowsRequest())
	cancel()
	if err != nil {
		s.cfg.Logger.Debug("flow counters unavailable", "dpid", sw.String(), "err", err)
		return
	}
	fc, err := dataplane.DecodeFlowCounters(body)
	if err != nil {
		s.cfg.Logger.Warn("flow counters", "dpid", sw.String(), "err", err)
		return
	}
	now := s.cfg.Now()
	c := Counts{At: now.UnixNano(), Bytes: make(map[uint64]uint64, len(fc))}
	for _, f := range fc {
		c.Bytes[f.Cookie] += f.Bytes
	}
	// No update is asked for: the rates are for the next period's, which comes anyway.
	if r := Rates(s.counts, c); r != nil {
		s.st.Rates, s.st.RatesAt = r, now
	}
	s.st.CountedAt = now
	s.publish()
	s.counts = c
}

// counterOffset is where in [0, spread) the switch dpid reads its counters: a fixed
// pseudo-random point per switch (a multiplicative hash of the id), so the fleet's reads
// spread evenly and each switch's reads stay one period apart.
func counterOffset(dpid uint64, spread time.Duration) time.Duration {
	if spread <= 0 {
		return 0
	}
	h := dpid * 0x9e3779b97f4a7c15
	return time.Duration((h >> 11) % uint64(spread))
}

// diffSummary says how two states differ, for the drift log line.
func diffSummary(want, got dataplane.State) string {
	count := func(a, b dataplane.State) (flows, groups int) {
		for _, f := range a.Flows {
			if !slices.Contains(b.Flows, f) {
				flows++
			}
		}
		for _, g := range a.Groups {
			if !slices.ContainsFunc(b.Groups, g.Equal) {
				groups++
			}
		}
		return
	}
	mf, mg := count(want, got)
	xf, xg := count(got, want)
	return fmt.Sprintf("%d flows and %d groups missing or changed, %d flows and %d groups unexpected", mf, mg, xf, xg)
}

func inc(c prometheus.Counter) {
	if c != nil {
		c.Inc()
	}
}

// Serves reports whether c is the session this syncer drives. The session itself is not
// handed out: the syncer is its only writer.
func (s *Syncer) Serves(c Conn) bool { return s.cfg.Conn == c }

// role brings the switch's view of our role in line with the election before a sync, and
// reports the term and whether this sync may write. Without a Lead it always may.
func (s *Syncer) role(ctx context.Context) (term uint64, write bool) {
	if s.cfg.Lead == nil {
		return 0, true
	}
	sw := s.cfg.Conn
	term, lead := s.cfg.Lead.Leading()
	if !lead {
		s.becomeSlave(ctx)
		return 0, false
	}
	if s.contested == term {
		return 0, false
	}
	if t, ok := s.confirmedWriter(); ok && t == term {
		return term, true
	}
	cctx, cancel := context.WithTimeout(ctx, 2*s.barrierTimeout())
	defer cancel()
	r, err := sw.RequestRole(cctx, ofp.ControllerRoleMaster, term)
	switch {
	case ofswitch.IsStale(err):
		s.contest(term, ContestStale, fmt.Sprintf("switch %s refused term %d as stale", sw, term))
		return 0, false
	case err != nil:
		s.cfg.Logger.Warn("master role request failed", "dpid", sw.String(), "term", term, "err", err)
		return 0, false
	case r.Role != ofp.ControllerRoleMaster || r.GenerationID != term:
		s.contest(term, ContestOtherRole, fmt.Sprintf("switch %s answered our master request in term %d with %s, generation id %d",
			sw, term, roleName(r.Role), r.GenerationID))
		return 0, false
	}
	s.master, s.slaveOK, s.newest = term, false, max(s.newest, term)
	s.st.Role, s.st.Term, s.st.Confirmed, s.st.Contested = "master", term, time.Time{}, ""
	s.resync = true // read back as master: the previous leader may have written until now
	s.publish()
	return term, true
}

// becomeSlave asks the switch for SLAVE with the newest term we know of, once per term: a
// standby then never gets packet-ins to answer and cannot write even by mistake.
func (s *Syncer) becomeSlave(ctx context.Context) {
	sw := s.cfg.Conn
	// With etcd down no leader is known (Term 0), but the switch still holds the last term:
	// a request with less would be refused as stale and leave a deposed leader MASTER there.
	term := max(s.cfg.Lead.Term(), s.newest)
	if s.master != 0 {
		s.master = 0
		s.st.Confirmed = time.Time{}
	}
	if s.slaveOK && s.slave >= term && sw.Role().Role == ofp.ControllerRoleSlave {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 2*s.barrierTimeout())
	defer cancel()
	r, err := sw.RequestRole(cctx, ofp.ControllerRoleSlave, term)
	if err != nil {
		// Stale: the switch has seen a newer term than we have; the next intent carries it.
		s.cfg.Logger.Debug("slave role request failed", "dpid", sw.String(), "term", term, "err", err)
		s.slaveOK = false
		return
	}
	s.slave, s.slaveOK, s.newest = term, true, term
	s.st.Role, s.st.Term = roleName(r.Role), r.GenerationID
	s.publish()
}

// roleChanged handles the switch telling us our role changed (another controller became
// master): we are no longer master, whatever the election last said.
func (s *Syncer) roleChanged() {
	r := s.cfg.Conn.Role()
	s.st.Role = roleName(r.Role)
	if r.Role != ofp.ControllerRoleMaster && s.master != 0 {
		s.resync = true
		s.contest(s.master, ContestStatus, fmt.Sprintf("switch %s says another controller is master (generation id %d)", s.cfg.Conn, r.GenerationID))
		return
	}
	s.publish()
}

// contest handles a switch claiming, in term, that another controller is master: this syncer
// stops writing to it for the term (until its next read-back), counts and reports it, and
// asks the election. Only the election can depose us: one unauthenticated connection on an
// unused datapath id could otherwise depose every leader in turn.
func (s *Syncer) contest(term uint64, why, reason string) {
	s.master, s.contested = 0, term
	s.st.Confirmed, s.st.Contested = time.Time{}, reason
	s.publish()
	if c := s.cfg.Metrics.Contested; c != nil {
		c.WithLabelValues(why).Inc()
	}
	s.cfg.Logger.Warn("switch contests our master role: not writing to it; asking the election whether a newer leader exists",
		"dpid", s.cfg.Conn.String(), "term", term, "reason", reason)
	s.cfg.Up.Event("role", "", reason+": not writing to it in term "+fmt.Sprint(term)+"; the election decides whether we step down")
	if s.cfg.Lead != nil {
		if t, ok := s.cfg.Lead.Leading(); ok && t == term {
			s.cfg.Lead.Contested(term, reason)
		}
	}
}

func (s *Syncer) barrierTimeout() time.Duration {
	if in := s.latest.Load(); in != nil && in.BarrierTimeout > 0 {
		return in.BarrierTimeout
	}
	return 5 * time.Second
}

func roleName(r ofp.ControllerRole) string {
	return strings.ToLower(strings.TrimPrefix(ofswitch.RoleName(r), "OFPCR_ROLE_"))
}
