// Package dispatch chooses the backend of each new connection of a service in reactive
// dispatch (dataplane.DispatchReactive, docs/dataplane.md "Reactive dispatch"): weighted least
// connections decided per connection, where the select group can only spread the next
// period's connections by weight.
//
// A Dispatcher is shared by every switch's syncer, so a backend's count covers the
// connections of the whole fleet. A backend's work in flight is its probe's latest
// in-flight count (the pool's, at the probe's in_flight_interval) plus the connections the
// Dispatcher sent it since that count was received; a count tens of milliseconds old is thus
// brought up to date by what the controller knows it added. A connection sent just before the
// probe took its count is not established in it yet, so the sends of the last 20 ms before the
// count arrived stay counted too (handshakeAllowance): a count that missed a burst's
// handshakes cannot herd the rest of the burst onto the backends that just got its start.
//
// The choice is the backend with the least (in flight + 1) / weight, HAProxy's weighted
// leastconn. The weights are the slow loop's, as the switch's group holds them: capacity,
// warm-up and drain still speak through them, and a backend at weight 0 gets nothing.
//
// Without a fresh count for every candidate (probes without in_flight_interval, an SNMP
// backend, a UDP service) the choice is smooth weighted round-robin: exact shares by weight,
// connection by connection, which a hash cannot give a few clients.
//
// pick.go is the pure choice; Dispatcher holds the state between choices under one lock.
package dispatch
