// Package sim is a seeded, deterministic discrete-event simulator of a heterogeneous backend
// pool, used to measure how well each balancing policy spreads load: mean and p99 response
// time, throughput, peak utilisation and how often the dynamic weights rewrite the switch.
//
// Why it exists: the weights package is pure arithmetic and its unit tests check the formula,
// not whether the formula balances a real queueing system well. docs/design.md's calibration
// showed that plausible formulas can be orders of magnitude apart on p99, so every default in
// weights.DefaultTuning should be backed by a run of this simulator.
//
// The model (see docs/benchmarks.md for the figures):
//
//   - Each backend has a true speed (work units per second, all its servers together), a
//     declared capacity (the CPU count the operator configured) and k parallel FCFS servers
//     of speed/k each (k = 1 by default, as in docs/design.md's calibration).
//   - Jobs arrive as a Poisson process at rate ρ·Σspeed/mean size; sizes are exponential
//     (or deterministic, or a two-phase hyperexponential) with a configurable mean in work
//     units. Response time = finish − arrival.
//   - A dispatcher picks the backend of each job when it arrives: round robin, least
//     connections (fewest jobs in the system, per request), weighted random by declared
//     capacity (static), by true speed (oracle), or by integer weights from weights.Compute.
//   - The dynamic policies run the same pipeline as the controller: every sample interval a
//     backend reports its busy fraction and its connection count (jobs in the system), each
//     smoothed with weights.EWMA; every update period weights.Compute runs with the carried
//     Learned/PrevShare/PrevWeight exactly as controller/balancer does, and the dispatcher's
//     weights change only when weights.Worth says so (each change is one rewrite).
//   - Optionally the probes' health checks run too (Config.Health, health.go): a check waits
//     for a free server like a job, fails past its timeout, and evicts by the collector's
//     rule or by the older one that counted every timeout (the lab's cascade at high load).
//   - Optionally the weighted dispatch goes through Open vSwitch's select group as the
//     controller lays it out: each new connection hashes into a 256-slot table rebuilt on
//     every weight change (internal/slots's exact model, see slots.go).
//
// Everything is driven by the seed: two random streams (arrivals and sizes; dispatch), so
// every policy sees exactly the same jobs, and the same seed always gives the same Result.
// The package reads no clock and does no I/O.
package sim
