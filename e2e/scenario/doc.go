// Package scenario builds the full flowweight lab topology with the real binaries: one Open
// vSwitch bridge (userspace datapath, fail_mode secure) whose controller target is a unix
// socket, the controller in its own namespace host "ctl", a client host, and backend hosts
// each running cmd/backendd inside a CPU-limited cgroup with the real probe pushing
// cgroup-scoped reports to the controller. Each probe finds its backendd through a pidfile
// the scenario writes ([service] pidfile), so it reports the service's own CPU too, unless
// Options.NoServiceCPU.
//
// Neither the root namespace nor the bridge's LOCAL port gets an address: the switch
// reaches the controller through the unix socket, and the controller's push listener and
// API live inside "ctl" (reach the API with Scenario.API, which dials from that namespace).
//
// It is not tied to testing: the controller's end-to-end tests and a one-command demo both
// use it. Everything it starts is owned by its e2e/lab Lab and stopped by Close. Load
// generators are bounded in count and time by construction.
//
// It talks to the controller only as an operator would: the TOML file, signals, the HTTP
// API and ovs-ofctl. It imports none of the controller's packages and redeclares the API's
// JSON shapes it reads, so a change there shows up as a failing end-to-end test rather than
// a silent compile-time adaptation (its unit tests do load the TOML it writes with the
// controller's and the probe's own config loaders).
//
// Two gaps of e2e/lab are bridged here rather than there: probes start with `nsenter
// --net` instead of Host.Command (`ip netns exec` mounts a fresh /sys without the cgroup
// file systems, so a cgroup-scoped probe cannot find its cgroup), and on cgroup v1 each
// backend also gets a memory cgroup at the same relative path (the lab makes cpu and cpuacct
// only; the probe reads memory there too), removed by Close but unknown to lab.Sweep.
package scenario
