// Package sample measures the load of the backend the probe runs on.
//
// Each source is its own small type with one Sample method (host CPU and memory from /proc
// through descriptors kept open between samples (Reread), a cgroup's CPU and memory,
// established TCP connections on the service ports, NIC throughput, CPU pressure from PSI, a
// cgroup's CFS throttling, the CPU of the service's own processes from a pidfile's process
// tree or a cgroup), so that one failing source leaves the others' fields intact: the agent
// merges the Values each sampler returns and a failed sampler's fields stay unknown. A signal
// this machine cannot provide at all (no PSI, no throttling counters) is marked Unavailable
// and wraps ErrUnavailable, which is not a failure.
//
// Reading a file is kept apart from understanding it: the parsers of /proc/net/tcp, sock_diag
// answers, /proc/stat, /proc/meminfo, cgroup files, pressure files, /proc/PID/stat and
// mountinfo are pure functions over bytes, tested on recorded fixtures and fuzzed. Rates are
// deltas between two readings, never point values, and the elapsed time comes from an
// injected clock. This package does not log or know the wire
// format; the only socket it opens is SockDiag's netlink socket to the kernel.
package sample
