// Package balancer runs the controller: it wires the collector (push reports, SNMP polls,
// health checks) to the weights engine, and the weights to every connected switch through
// the planner (controller/dataplane) and the OpenFlow sessions (controller/ofswitch). It also
// answers ARP for the VIPs and learns backend MACs and ports, reads switch state back to
// repair drift, and applies configuration reloads atomically.
//
// The arithmetic lives in weights, the flow layout in dataplane, the bytes in ofswitch and
// nx; this package holds the loops and the state between them.
package balancer
