// Package weights turns backend states into integer select-group bucket weights.
//
// It is pure arithmetic: no I/O, no clock reads, no logging. Everything it needs — smoothed
// utilisations, capacities, health status, how long a backend has been warming, the previous
// result — arrives as arguments, and everything it decides leaves as return values together
// with an explanation per backend, so logs, the API and the dashboard can show why a backend
// got its weight. Callers (the controller) keep the state between calls.
//
// The formula, per backend i over the live (up or warming) backends:
//
//	LS_i = r_cpu·cpu_i + r_mem·mem_i + r_conn·min(conns_i/max_conns, 1) + r_net·net_i   (load, [0,1])
//	C_i  = (c_cpu·P_i/mean(P) + c_mem·M_i/mean(M)) · factor_i · learned_i               (capacity)
//	AL_i = LS_i / C_i                                                                    (load per capacity)
//	target share ∝ 1/AL_i = C_i / max(LS_i, min_load)                                    (the seeds' formula)
//
// then, in this order: damping toward the previous share (gain), a per-update step limit,
// warm-up, a floor for healthy backends, and exact integer rounding. Capacity here means
// speed (work per second at full utilisation), so equal utilisation gives weights
// proportional to capacity. See docs/weights.md for why each rule exists.
//
// The formula above is the dynamic policy's. Each policy (static, equal, least_conn, dynamic,
// headroom) is a Policy in its own file that supplies only its raw target shares and a few
// traits (whether it learns and is damped, whether it is a fixed split); Compute (compute.go)
// is the pipeline they share, from eligibility and bounded capacity claims to the explanation.
// The shaping steps are in shape.go (the watched warm-up, which ramps a newcomer by how it
// serves its share, in warmwatch.go), the rounding in round.go (through internal/apportion,
// the largest remainder the slot model uses too), the panic rule in panic.go and the rewrite
// test in worth.go.
//
// It is pure arithmetic: it does no I/O, does not log, and must not import the collector,
// the probe or the controller (internal/layers checks).
package weights
