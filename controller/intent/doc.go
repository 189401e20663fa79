// Package intent is what the controller wants the switches to hold after one update: every
// service with its applied weights, which groups are in their start-up hold, what changed
// and where each service is placed. The balancer builds one Intent per update, once, under
// its state lock; from then on it is immutable and shared by every switch's syncer
// (controller/switchsync), which plans from the latest one without taking any lock of the
// balancer's.
//
// Data flows one way: state (collector, weights) → intent → per-switch sync. This package
// holds values only; it must not import the balancer, the syncer or the OpenFlow session
// (controller/ofswitch), and nothing in it does I/O.
package intent
