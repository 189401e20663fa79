// Package apportion holds the project's one largest-remainder method: the rule that turns
// exact fractional quotas into integers with a fixed sum. The weights (shares into integer
// bucket weights summing to the total) and the slot model (weights into the switch's slot
// table, internal/slots) both round through it, so the two agree on which part gets the
// unit a tie leaves over.
//
// It is a leaf: it imports nothing of the project (internal/layers checks).
package apportion
