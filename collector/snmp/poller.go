package snmp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/gosnmp/gosnmp"
)

// Sample is one poll's view of a backend.
type Sample struct {
	// CPUUtil is the busy fraction of all CPUs in [0,1]; meaningful only
	// when CPUKnown.
	CPUUtil float64
	// CPUKnown is false when the agent gave no usable CPU figure in this
	// poll: no counter delta yet (first poll, or the agent's counters still
	// 0) and no hrProcessorLoad (the agent's first minute). The caller should
	// keep its previous CPU estimate rather than read 0 as idle.
	CPUKnown bool
	// CPUCount is the number of hrProcessorTable rows (logical CPUs).
	CPUCount float64
	// MemUtil is the used fraction of physical memory in [0,1]:
	// 1 - (memAvailReal+memBuffer+memCached)/memTotalReal, because on
	// Linux memAvailReal is MemFree (see oids.go).
	MemUtil float64
	// MemBytes is physical memory size (memTotalReal kB * 1024).
	MemBytes uint64
	// Conns is the number of established TCP connections on the target's
	// service ports (or on all ports, see ConnSource).
	Conns uint32
	// CPUSource says where CPUUtil came from: "ucd_raw" (ssCpuRaw* counter
	// delta), "hr_load" (mean hrProcessorLoad, a one-minute average) or ""
	// when !CPUKnown.
	CPUSource string
	// ConnSource says where Conns came from: "tcpConnTable" (per service
	// port, every port had an IPv4 listener in the legacy table),
	// "tcpConnectionTable" (per service port, at least one port counted
	// from the RFC 4022 table because its listener is an IPv6 or
	// dual-stack socket; that table can be up to a minute old) or
	// "tcpCurrEstab" (all ports: no service ports configured, or neither
	// table had rows).
	ConnSource string
}

// CPU and connection source names used in Sample.
const (
	CPUSourceUCDRaw              = "ucd_raw"
	CPUSourceHRLoad              = "hr_load"
	ConnSourceTCPConnectionTable = "tcpConnectionTable"
	ConnSourceTCPConnTable       = "tcpConnTable"
	ConnSourceTCPCurrEstab       = "tcpCurrEstab"
)

// Step names in errors.
const (
	scalarStep        = "get sysUpTime/ssCpuRaw*/mem*/tcpCurrEstab"
	processorStep     = "walk hrProcessorTable " + oidHrProcessorEntry
	tcpConnectionStep = "walk tcpConnectionTable tcpConnectionState " + oidTCPConnectionState
	tcpConnStep       = "walk tcpConnTable tcpConnState " + oidTCPConnState
)

// Errors a caller may want to tell apart (use errors.Is).
var (
	// ErrAuth means the v3 agent rejected the credentials: unknown user,
	// wrong authentication passphrase or protocol, or a security level the
	// user is not allowed.
	ErrAuth = errors.New("v3 authentication failed")
	// ErrNoResponse means the agent never answered within
	// Timeout*(Retries+1). For v3 a wrong privacy passphrase looks the same,
	// because net-snmp silently drops requests it cannot decrypt.
	ErrNoResponse = errors.New("no response")
	// ErrTooManyRows means a table walk returned more rows than its bound
	// (MaxProcessors, Target.MaxConnRows): the poll fails rather than
	// report an absurd CPU count or hold an unbounded answer.
	ErrTooManyRows = errors.New("too many rows")
	// ErrCounters means the agent's ssCpuRaw tick counters moved in a way
	// no CPU can: backwards without the agent restarting, or by more ticks
	// than its processors can count in the time elapsed.
	ErrCounters = errors.New("implausible CPU tick counters")
)

// Walk bounds.
const (
	// MaxProcessors bounds hrProcessorTable rows: 8192 is the largest
	// NR_CPUS Linux builds (x86-64 MAXSMP). A walk of hrProcessorEntry
	// (two columns) may return at most twice as many varbinds.
	MaxProcessors = 8192
	// DefaultMaxConnRows is Target.MaxConnRows when 0. Walking 100,000
	// rows at net-snmp's pace already takes longer than a poll interval.
	DefaultMaxConnRows = 100_000
)

// processorColumns is how many columns of hrProcessorEntry a walk returns
// (hrProcessorFrwID and hrProcessorLoad).
const processorColumns = 2

// Agent is the part of an SNMP session the Poller needs. The gosnmp session
// implements it in production; unit tests replay recorded answers.
type Agent interface {
	// Get fetches the given scalar OIDs in one request. Values the agent
	// does not have come back as NoSuchObject/NoSuchInstance varbinds.
	Get(ctx context.Context, oids []string) ([]gosnmp.SnmpPDU, error)
	// BulkWalk returns every varbind below root; an absent subtree gives
	// no varbinds and no error. A subtree past the budget stops the walk
	// there, no further request sent, with an error wrapping
	// ErrTooManyRows (more varbinds) or ErrTooLarge (more bytes, or one
	// varbind over MaxVarbindBytes), so a hostile or broken agent can make
	// the poller neither collect without end nor hold huge values.
	BulkWalk(ctx context.Context, root string, budget Budget) ([]gosnmp.SnmpPDU, error)
	// Close releases the session.
	Close() error
}

// Poller polls one backend's agent. It keeps the previous ssCpuRaw counters
// so that each poll can report the CPU utilisation since the last one. Its
// methods are safe for concurrent use, but polls are serialised.
type Poller struct {
	target Target
	agent  Agent
	ports  []uint16 // distinct ServicePorts

	mu         sync.Mutex
	prev       cpuTicks // last non-zero counter reading
	havePrev   bool
	prevAt     uint32 // sysUpTime when prev was read
	prevAtOK   bool
	prevUptime uint32
	lastUtil   float64 // last counter-delta utilisation, reused while the agent's counters stand still
	haveLast   bool
}

// NewPoller validates t and opens a UDP session to its agent. Nothing is
// sent until the first Poll.
func NewPoller(t Target) (*Poller, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	g, err := t.session()
	if err != nil {
		return nil, err
	}
	if err := g.Connect(); err != nil {
		return nil, fmt.Errorf("snmp %s: open UDP session: %w", t.Address, err)
	}
	return newPoller(t, &gosnmpAgent{g: g}), nil
}

// NewPollerWithAgent is NewPoller over a caller-supplied Agent, for tests of
// code that uses a Poller and for other transports.
func NewPollerWithAgent(t Target, a Agent) (*Poller, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if a == nil {
		return nil, fmt.Errorf("snmp %s: nil Agent", t.Address)
	}
	return newPoller(t, a), nil
}

func newPoller(t Target, a Agent) *Poller {
	var ports []uint16
	seen := make(map[uint16]bool, len(t.ServicePorts))
	for _, p := range t.ServicePorts {
		if !seen[p] {
			seen[p] = true
			ports = append(ports, p)
		}
	}
	return &Poller{target: t, agent: a, ports: ports}
}

// Close closes the session; it waits for a running Poll. Polls after Close
// fail.
func (p *Poller) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.agent.Close()
}

// Poll asks the agent once and returns the backend's sample. Any failure to
// reach the agent is an error (the caller counts it as a failed check); the
// error names the agent address and the step or OID at fault.
func (p *Poller) Poll(ctx context.Context) (Sample, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	p.mu.Lock()
	defer p.mu.Unlock()

	// Gather everything first, then change state only when the whole poll
	// succeeded, so a failed poll leaves the CPU baseline untouched.
	pdus, err := p.agent.Get(ctx, scalarOIDs)
	if err != nil {
		return Sample{}, p.requestError(scalarStep, err)
	}
	// A GET is answered with one varbind per OID asked (RFC 3416); more, or longer ones,
	// are refused before anything reads them.
	if err := (Budget{Varbinds: len(scalarOIDs), Bytes: len(scalarOIDs) * MaxVarbindBytes}).check(pdus); err != nil {
		return Sample{}, fmt.Errorf("snmp %s: %s: %w", p.target.Address, scalarStep, err)
	}
	sc, err := parseScalars(pdus)
	if err != nil {
		return Sample{}, fmt.Errorf("snmp %s: %w", p.target.Address, err)
	}
	pdus, err = p.walk(ctx, processorStep, oidHrProcessorEntry, Budget{Varbinds: processorColumns * MaxProcessors, Bytes: MaxProcessorWalkBytes}, "processors", MaxProcessors)
	if err != nil {
		return Sample{}, err
	}
	proc, err := parseProcessors(pdus)
	if err != nil {
		return Sample{}, fmt.Errorf("snmp %s: %w", p.target.Address, err)
	}

	var s Sample
	s.CPUCount = float64(proc.count)
	s.MemBytes, s.MemUtil = sc.memory()

	s.ConnSource = ConnSourceTCPCurrEstab
	if len(p.ports) > 0 {
		n, source, ok, err := p.serviceConns(ctx)
		if err != nil {
			return Sample{}, err
		}
		if ok {
			s.Conns, s.ConnSource = n, source
		}
	}
	if s.ConnSource == ConnSourceTCPCurrEstab {
		if !sc.tcpCurrEstabOK {
			return Sample{}, fmt.Errorf("snmp %s: no connection count: tcpCurrEstab (%s) missing, and no service ports configured or both TCP connection tables empty", p.target.Address, oidTCPCurrEstab)
		}
		s.Conns = sc.tcpCurrEstab
	}

	if err := p.updateCPU(&s, sc, proc); err != nil {
		return Sample{}, fmt.Errorf("snmp %s: %w", p.target.Address, err)
	}
	return s, nil
}

// serviceConns walks the legacy tcpConnTable and, only when a service port
// has no IPv4 listener there, tcpConnectionTable (see tcp.go). ok is false
// when both tables are empty.
func (p *Poller) serviceConns(ctx context.Context) (n uint32, source string, ok bool, err error) {
	pdus, err := p.walk(ctx, tcpConnStep, oidTCPConnState, p.connBudget(), "connection rows", p.maxConnRows())
	if err != nil {
		return 0, "", false, err
	}
	legacy, err := parseTCPConnTable(pdus)
	if err != nil {
		return 0, "", false, fmt.Errorf("snmp %s: %w", p.target.Address, err)
	}
	var modern *tcpTable
	if needsConnectionTable(p.ports, legacy) {
		pdus, err := p.walk(ctx, tcpConnectionStep, oidTCPConnectionState, p.connBudget(), "connection rows", p.maxConnRows())
		if err != nil {
			return 0, "", false, err
		}
		t, err := parseTCPConnectionTable(pdus)
		if err != nil {
			return 0, "", false, fmt.Errorf("snmp %s: %w", p.target.Address, err)
		}
		modern = &t
	}
	n, source, ok = countServiceConns(p.ports, legacy, modern)
	return n, source, ok, nil
}

func (p *Poller) maxConnRows() int {
	if p.target.MaxConnRows > 0 {
		return p.target.MaxConnRows
	}
	return DefaultMaxConnRows
}

// connBudget is the budget of one TCP connection table walk.
func (p *Poller) connBudget() Budget {
	b := Budget{Varbinds: p.maxConnRows(), Bytes: p.target.MaxWalkBytes}
	if b.Bytes == 0 {
		b.Bytes = DefaultMaxWalkBytes
	}
	return b
}

// walk runs one bounded walk. The budget is checked here too, so an Agent
// that ignores it cannot slip a huge table past the parsers.
func (p *Poller) walk(ctx context.Context, step, root string, budget Budget, unit string, bound int) ([]gosnmp.SnmpPDU, error) {
	pdus, err := p.agent.BulkWalk(ctx, root, budget)
	if err == nil {
		err = budget.check(pdus)
	}
	if errors.Is(err, ErrTooManyRows) {
		return nil, fmt.Errorf("snmp %s: %s: %w: more than %d varbinds below %s (bound: %d %s)", p.target.Address, step, ErrTooManyRows, budget.Varbinds, root, bound, unit)
	}
	if errors.Is(err, ErrTooLarge) {
		return nil, fmt.Errorf("snmp %s: %s: %w below %s (bound: %d bytes, %d per varbind)", p.target.Address, step, err, root, budget.Bytes, MaxVarbindBytes)
	}
	if err != nil {
		return nil, p.requestError(step, err)
	}
	return pdus, nil
}

// updateCPU fills the CPU utilisation and advances the counter baseline.
// Counters that moved implausibly (checkTicks) fail the poll and become the
// new baseline, so one jump costs one poll, not every poll after it.
func (p *Poller) updateCPU(s *Sample, sc scalars, proc processors) error {
	if sc.uptimeOK {
		if p.havePrev && sc.uptime < p.prevUptime {
			// The agent restarted (or sysUpTime wrapped after 497
			// days): its counters may no longer relate to ours.
			p.havePrev, p.haveLast = false, false
		}
		p.prevUptime = sc.uptime
	}
	if sc.cpuOK && sc.cpu.zero() {
		// A freshly (re)started agent answers 0 until its first refresh.
		p.havePrev, p.haveLast = false, false
	}
	if sc.cpuOK && !sc.cpu.zero() {
		if p.havePrev {
			elapsed := sc.uptime - p.prevAt
			if err := checkTicks(p.prev, sc.cpu, elapsed, sc.uptimeOK && p.prevAtOK, proc.count); err != nil {
				p.prev, p.prevAt, p.prevAtOK, p.haveLast = sc.cpu, sc.uptime, sc.uptimeOK, false
				return err
			}
			if u, ok := cpuUtil(p.prev, sc.cpu); ok {
				p.lastUtil, p.haveLast = u, true
			}
		}
		p.prev, p.havePrev, p.prevAt, p.prevAtOK = sc.cpu, true, sc.uptime, sc.uptimeOK
		if p.haveLast {
			// When the counters stood still since the last poll (the
			// agent refreshes them every 5 s) the last delta is still
			// the agent's newest knowledge.
			s.CPUUtil, s.CPUKnown, s.CPUSource = p.lastUtil, true, CPUSourceUCDRaw
			return nil
		}
	}
	if proc.loadOK {
		s.CPUUtil, s.CPUKnown, s.CPUSource = proc.meanLoad, true, CPUSourceHRLoad
	}
	return nil
}

// requestError wraps a transport error with the address, the step and, for
// the cases an operator must act on, what it means.
func (p *Poller) requestError(step string, err error) error {
	addr := p.target.Address
	switch {
	case errors.Is(err, gosnmp.ErrWrongDigest):
		return fmt.Errorf("snmp %s: %w for user %s: %s: wrong digest (check AuthProtocol and AuthPassphrase): %w", addr, ErrAuth, p.target.User, step, err)
	case errors.Is(err, gosnmp.ErrUnknownUsername):
		return fmt.Errorf("snmp %s: %w for user %s: %s: agent does not know this user: %w", addr, ErrAuth, p.target.User, step, err)
	case errors.Is(err, gosnmp.ErrUnknownSecurityLevel):
		return fmt.Errorf("snmp %s: %w for user %s: %s: user not allowed authPriv on the agent: %w", addr, ErrAuth, p.target.User, step, err)
	case p.target.Version == "v3" && strings.Contains(err.Error(), gosnmpNotAuthentic):
		return fmt.Errorf("snmp %s: %w for user %s: %s: agent rejected the credentials (unknown user, or wrong AuthPassphrase or AuthProtocol): %w", addr, ErrAuth, p.target.User, step, err)
	case errors.Is(err, gosnmp.ErrDecryption):
		return fmt.Errorf("snmp %s: %w for user %s: %s: agent could not decrypt (check PrivProtocol and PrivPassphrase): %w", addr, ErrAuth, p.target.User, step, err)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("snmp %s: %s: %w before the context deadline: %w", addr, step, ErrNoResponse, err)
	case errors.Is(err, gosnmp.ErrMaxRetriesExceeded):
		hint := ""
		if p.target.Version == "v3" {
			hint = " (for v3 a wrong PrivPassphrase or PrivProtocol also looks like this)"
		}
		return fmt.Errorf("snmp %s: %s: %w after %d attempt(s) of %v%s: %w", addr, step, ErrNoResponse, p.target.Retries+1, p.target.Timeout, hint, err)
	}
	return fmt.Errorf("snmp %s: %s: %w", addr, step, err)
}

// gosnmpNotAuthentic is how gosnmp v1.47.0 reports a v3 answer it cannot
// authenticate. net-snmp answers a wrong digest or an unknown user with an
// unauthenticated Report (usmStatsWrongDigests / usmStatsUnknownUserNames),
// which gosnmp discards with this plain error before looking at the Report,
// so its ErrWrongDigest and ErrUnknownUsername never appear against
// net-snmp. The integration test against the real snmpd pins this text.
const gosnmpNotAuthentic = "incoming packet is not authentic"

// gosnmpAgent adapts a gosnmp session to Agent.
type gosnmpAgent struct {
	g *gosnmp.GoSNMP
}

func (a *gosnmpAgent) Get(ctx context.Context, oids []string) ([]gosnmp.SnmpPDU, error) {
	a.g.Context = ctx
	pkt, err := a.g.Get(oids)
	if err != nil {
		return nil, err
	}
	if pkt.Error != gosnmp.NoError {
		return nil, fmt.Errorf("agent answered error-status %v for varbind %d", pkt.Error, pkt.ErrorIndex)
	}
	return pkt.Variables, nil
}

func (a *gosnmpAgent) BulkWalk(ctx context.Context, root string, budget Budget) ([]gosnmp.SnmpPDU, error) {
	a.g.Context = ctx
	var out []gosnmp.SnmpPDU
	t := tally{budget: budget}
	err := a.g.BulkWalk(root, func(p gosnmp.SnmpPDU) error {
		if err := t.add(p); err != nil {
			return err // stops the walk: no further requests are sent
		}
		out = append(out, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (a *gosnmpAgent) Close() error {
	return a.g.Close()
}
