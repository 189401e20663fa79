package balancer

import (
	"maps"
)

// maybeSaveState is the update loop's periodic write.
func maybeSaveState(b *Balancer) {
	if b.st.due() {
		b.saveState()
	}
}

// publishLocked publishes the running state as an update and a connect would: tests that set
// services or the registry by hand call it before reading the views. b.mu must be held.
func publishLocked(b *Balancer) {
	b.board.PublishSwitches(maps.Clone(b.switches))
	b.board.Publish(snapshotOf(b.services, b.intentLocked(false)))
}
