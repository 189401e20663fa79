// Package sample measures the load of the backend the probe runs on.
//
// Each source is its own small type with one Sample method (host CPU and memory through
// gopsutil, a cgroup's CPU and memory, established TCP connections on the service ports, NIC
// throughput), so that one failing source leaves the others' fields intact: the agent merges
// the Values each sampler returns and a failed sampler's fields stay unknown.
//
// Reading a file is kept apart from understanding it: the parsers of /proc/net/tcp, cgroup
// files and mountinfo are pure functions over bytes, tested on recorded fixtures and fuzzed.
// Rates are deltas between two readings, never point values, and the elapsed time comes from
// an injected clock. This package does not log, open sockets or know the wire format.
package sample
