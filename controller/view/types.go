package view

import (
	"time"

	"flowweight/weights"
)

// ServiceView is what the API, the dashboard and `controller status` show of one service.
type ServiceView struct {
	Name string `json:"name"`
	VIP  string `json:"vip"`
	Port int    `json:"port"`
	Mode string `json:"mode"`
	// Dispatch is who chooses each new connection's backend: "group" (the switch, by the
	// weights) or "reactive" (the controller, by least connections; docs/dataplane.md).
	Dispatch string `json:"dispatch"`
	GroupID  int    `json:"group_id"`
	Policy   string `json:"policy"`
	// PolicyFallback says why the headroom policy ran as 1/AL (a backend without the
	// service's own CPU); empty when it did not.
	PolicyFallback string `json:"policy_fallback,omitempty"`
	// ShadowPolicy is the service's shadow_policy: computed beside the live policy from the
	// same inputs and never applied (each backend's ShadowWeight and ShadowShare); omitted
	// without one.
	ShadowPolicy string `json:"shadow_policy,omitempty"`
	// CanaryDatapaths are the switches that hold the shadow policy's weights instead of the
	// live ones (canary_datapaths; docs/weights.md, "Canary"), as datapath ids; omitted
	// without a canary.
	CanaryDatapaths []string      `json:"canary_datapaths,omitempty"`
	Panic           bool          `json:"panic"`
	Total           int           `json:"total"`
	Backends        []BackendView `json:"backends"`
	// SlotTable is the number of slots of the service's select-group table on the first
	// connected switch (docs/dataplane.md, "Exact shares"); 0 while no switch is connected.
	SlotTable int `json:"slot_table"`
	// SlotFallback is set when that switch would not build a table for the group (only
	// possible on Open vSwitch before 2.10): the split is then not proportional.
	SlotFallback bool `json:"slot_fallback"`
	// UDPHash is how that switch hashes the new flows of a UDP service: "per_flow" (the
	// 5-tuple, ports included, into the controller's slot flows) or "per_address" (the
	// select group, which leaves UDP ports out: an old or unknown Open vSwitch, or affinity;
	// docs/dataplane.md, "UDP per flow"). Empty for TCP, for reactive dispatch and while no
	// switch is connected.
	UDPHash string `json:"udp_hash,omitempty"`
}

// BackendView is one backend: its state, smoothed metrics and the explanation of its weight.
type BackendView struct {
	Name          string    `json:"name"`
	IP            string    `json:"ip"`
	Port          int       `json:"port"`
	Source        string    `json:"source"`
	State         string    `json:"state"`
	StateSince    time.Time `json:"state_since"`
	CPU           float64   `json:"cpu"`
	Mem           float64   `json:"mem"`
	Conns         float64   `json:"conns"` // smoothed: the weighting's input
	CPUCount      float64   `json:"cpu_count"`
	MemBytes      float64   `json:"mem_bytes"`
	LastReportAge float64   `json:"last_report_age_seconds"` // -1 when none yet
	Health        string    `json:"health"`
	// Slow: the backend's health checks time out while it is busy; it serves at a reduced
	// share instead of being evicted (docs/weights.md, "Busy is not dead").
	Slow           bool    `json:"slow"`
	ProbeDrain     bool    `json:"probe_drain"`
	OperatorDrain  bool    `json:"operator_drain"`
	ThroughputBps  float64 `json:"throughput_bytes_per_second"`
	ComputedWeight uint16  `json:"computed_weight"`
	AppliedWeight  uint16  `json:"applied_weight"`
	// BaseWeight is the slow loop's weight (every update_period, from smoothed load); while
	// the fast loop runs (Followed), AppliedWeight is it corrected by InFlight, the backend's
	// work in flight as last read (nil: no fresh count, so it kept its base share).
	BaseWeight uint16   `json:"base_weight"`
	Followed   bool     `json:"followed"`
	InFlight   *float64 `json:"in_flight"`
	// Dispatched is how many new connections the controller sent the backend in reactive
	// dispatch since it started, and DispatchInFlight its work in flight as the last choice
	// estimated it (the probe's count plus what was sent since); omitted otherwise.
	Dispatched       *uint64  `json:"dispatched,omitempty"`
	DispatchInFlight *float64 `json:"dispatch_in_flight,omitempty"`
	// Connections is the latest connection count as reported, not smoothed (null: none
	// yet), from ConnectionsSource ("probe" or "snmp"), ConnectionsAge seconds ago: what a
	// drain waits to see reach 0.
	Connections       *float64            `json:"connections"`
	ConnectionsSource string              `json:"connections_source,omitempty"`
	ConnectionsAge    *float64            `json:"connections_age_seconds,omitempty"`
	Explanation       weights.Explanation `json:"explanation"`
	LearnedCapacity   float64             `json:"learned_capacity"`
	// Share is the backend's share of new connections by the applied weights, 0..1.
	Share float64 `json:"share"`
	// ShadowWeight and ShadowShare are the weight and share the service's shadow policy
	// would give the backend (compare with BaseWeight: the shadow has no fast loop); omitted
	// without a shadow policy or before its first computation. Never applied.
	ShadowWeight *uint16  `json:"shadow_weight,omitempty"`
	ShadowShare  *float64 `json:"shadow_share,omitempty"`
	// Slots are the slots of the switch's table that send to the backend, and RealisedShare
	// is Slots / SlotTable: what the switch really does with new connections.
	Slots         int     `json:"slots"`
	RealisedShare float64 `json:"realised_share"`
	// Measured is, per connected switch, what the service's group on it really sent to the
	// backend over the last minute, read from its bucket counters (measured.go; omitted
	// before a switch's first two readings).
	Measured []MeasuredView `json:"measured,omitempty"`
	// Signals lists the optional signals of the backend's latest report ("service_cpu,
	// cpu_pressure"; "none"), and the values of those present: absent is not zero.
	Signals     string   `json:"signals"`
	ServiceCPU  *float64 `json:"service_cpu,omitempty"`
	CPUPressure *float64 `json:"cpu_pressure,omitempty"`
	// PressureScope is "cgroup" or "host", with CPUPressure.
	PressureScope string   `json:"pressure_scope,omitempty"`
	Throttled     *float64 `json:"throttled,omitempty"`
	// HealthLatency is the last health check's time in seconds, when measured.
	HealthLatency *float64 `json:"health_latency_seconds,omitempty"`
}

// MeasuredView is one backend's measured share on one switch (docs/dataplane.md, "Measured
// shares"). In conntrack mode a count is a new connection (the group sees only a connection's
// first packets); in stateless mode every packet passes the group, so the count is of packets
// (Unit) and MeasuredPackets carries it instead of MeasuredNewConnections.
type MeasuredView struct {
	DPID string `json:"dpid"`
	Unit string `json:"unit"`
	// MeasuredShare is the backend's part of every count in the window (null: nothing counted
	// yet), PlannedShare the slot table's share for the same counts (weighted by them when
	// the table changed within the window).
	MeasuredShare *float64 `json:"measured_share"`
	PlannedShare  float64  `json:"planned_share"`
	// MeasuredNewConnections (conntrack) or MeasuredPackets (stateless) is the backend's
	// count in the window, and Total the service's: with Total n, a fair split's measured
	// share strays from the planned p by about SamplingError = sqrt(p(1-p)/n).
	MeasuredNewConnections *uint64 `json:"measured_new_connections,omitempty"`
	MeasuredPackets        *uint64 `json:"measured_packets,omitempty"`
	Total                  uint64  `json:"total"`
	SamplingError          float64 `json:"sampling_error"`
	// WindowSeconds is the time the counts cover; SkippedDeltas counts the readings within
	// it that were discarded (a group rewritten or re-created, counters gone backwards).
	WindowSeconds float64 `json:"window_seconds"`
	SkippedDeltas int     `json:"skipped_deltas"`
	// PinnedNewConnections, with client affinity, is how many of MeasuredNewConnections
	// returning clients opened to their learned backend past the group (its table-8 flow's
	// counter): MeasuredShare is then of every new connection, PlannedShare of the group's,
	// and MeasuredGroupShare the group's own split to compare it with (SamplingError is of
	// the group's count).
	PinnedNewConnections *uint64  `json:"pinned_new_connections,omitempty"`
	MeasuredGroupShare   *float64 `json:"measured_group_share,omitempty"`
	// Correction is what the switch does about the pinned connections' skew
	// (share_correction; docs/dataplane.md, "Correcting the measured share").
	Correction *CorrectionView `json:"correction,omitempty"`
}

// CorrectionView is one backend's part of a service's share correction on one switch.
type CorrectionView struct {
	// State is "off" (the skew is within what sampling explains, or too few connections),
	// "correcting" (the group's slots are moving toward the split), or "settled" (the split
	// the group's shares give with the pinned connections is within a point of the computed
	// one); SettledReadings counts the readings in a row it has been, Residual is the
	// largest difference left.
	State           string `json:"state"`
	SettledReadings int    `json:"settled_readings"`
	// ComputedShare is the share the weights give the backend, PinnedShare the share of all
	// the window's new connections pinned to it, GroupShare the share of the group's new
	// connections the correction plans for it (ComputedShare when off).
	ComputedShare float64 `json:"computed_share"`
	PinnedShare   float64 `json:"pinned_share"`
	GroupShare    float64 `json:"group_share"`
	// Bound names what limited the backend's group share ("" none).
	Bound string `json:"bound,omitempty"`
	// Skew is the service's largest difference between a computed share and the split its
	// pinned connections alone would make, Threshold what starts a correction; Reason says
	// what the last reading did.
	Skew      float64 `json:"skew"`
	Threshold float64 `json:"threshold"`
	Residual  float64 `json:"residual"`
	Reason    string  `json:"reason"`
}

// SwitchView is one connected switch as its syncer last reported it: how far behind the
// latest intent it is, and when it last took a write.
type SwitchView struct {
	DPID string `json:"dpid"`
	// OVS is the Open vSwitch version from the switch's DESC, "" when it did not say.
	OVS string `json:"ovs,omitempty"`
	// Known: the controller has read back or written what the switch holds.
	Known bool `json:"known"`
	// Intent is the update whose intent the switch holds (0: none yet); Behind counts the
	// updates since (0: in step).
	Intent uint64 `json:"intent"`
	Behind uint64 `json:"behind"`
	// LastApply is when the last plan was confirmed by its barrier replies, with the time
	// the plan took.
	LastApply      time.Time `json:"last_apply"`
	LastApplyMicro int64     `json:"last_apply_us"`
	// Role is this controller's role on the switch as the switch confirmed it (equal without
	// HA, master or slave), Term the generation id, and Confirmed when the switch first
	// acknowledged a barrier from this controller as master in Term (omitted: not yet).
	Role      string     `json:"role"`
	Term      uint64     `json:"term,omitempty"`
	Confirmed *time.Time `json:"confirmed,omitempty"`
}

// Point is one entry of a backend's recent history, for the dashboard's chart.
type Point struct {
	Time   time.Time `json:"t"`
	Weight uint16    `json:"w"`
	AL     float64   `json:"al"`
}

// HAView is the election as the API and `controller status` show it.
type HAView struct {
	Enabled bool   `json:"enabled"`
	Role    string `json:"role"` // "leader", "standby"; "single" without HA
	Leader  string `json:"leader,omitempty"`
	Term    uint64 `json:"term,omitempty"`
	// LeaseRemaining is, on the leader, how long it may still write without a keep-alive
	// answered (seconds).
	LeaseRemaining float64 `json:"lease_remaining_seconds,omitempty"`
	LeaseTTL       float64 `json:"lease_ttl_seconds,omitempty"`
	Error          string  `json:"error,omitempty"`
	// Switches is each connected switch's role for this controller, by datapath id.
	Switches map[string]string `json:"switches,omitempty"`
}
