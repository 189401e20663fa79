// Package lab builds a throwaway network lab on one machine: a private Open
// vSwitch (ovsdb-server + ovs-vswitchd --disable-system, userspace datapath),
// hosts in network namespaces attached to its bridges by veth pairs, CPU
// quotas in cgroups (v1 or v2, detected) and the processes that run in them.
//
// It is a library, not a test helper: the controller's end-to-end tests, the
// one-command demo and the benchmarks all use it, so nothing here imports
// testing (ForTest takes a small interface instead). Every constructor
// registers its teardown on the Lab, and Lab.Close undoes everything in
// reverse order.
//
// Tests talk from inside a host without external tools: Host.DialContext,
// Host.HTTPClient (one connection per request) and Host.Ping create their
// sockets on a thread switched into the namespace (setns), since ping is
// not installed on every lab machine and curl would reuse connections.
// A host has one IPv4 or one IPv6 address; IPv6 hosts have duplicate address
// detection off so their addresses work at once (Ping is ICMPv4 only).
//
// Safety rules kept by construction: every name (namespace, veth, bridge,
// cgroup) starts with the lab's prefix "fw"+ID so that two labs or a leftover
// never collide and Sweep can find leftovers; the bridge's LOCAL port never
// gets an address and no uplink is ever attached, so lab traffic stays inside
// the namespaces; only PIDs the lab started are signalled.
//
// Measured on this machine (Open vSwitch 3.1): two ovs-vswitchd processes
// with a netdev datapath cannot run at the same time in one network
// namespace, because both need the tap device "ovs-netdev" ("creating tap
// device failed: Device or resource busy", then the bridge is not created).
// StartOVS therefore holds a host-wide lock (a flock on LockPath) for the life
// of the switch, and waits for a stray "ovs-netdev" to go away. A vswitchd
// killed while bridges exist leaves its tap devices behind; Close deletes
// the bridges before stopping the daemon, and Sweep removes what a crash left.
package lab
