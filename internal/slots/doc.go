// Package slots models how Open vSwitch turns a select group's bucket weights into the slot
// table that splits new connections (ovs.go), and how the controller apportions computed
// weights to that table so that the switch realises them to one slot (apportion.go,
// layout.go; docs/dataplane.md, "Exact shares"). It is a function of plain weights and the
// switch's version: controller/dataplane lays groups out with it, and the simulator
// (weights/sim) dispatches through it, so both use the model that
// controller/dataplane/slots_integration_test.go checks against a real switch.
//
// It is a leaf: it knows nothing of the controller, the weights or the collector, and
// rounds through internal/apportion, the largest-remainder method the weights use too
// (internal/layers checks).
package slots
