package switchsync

import (
	"context"
	"fmt"

	"flowweight/controller/dataplane"
	"flowweight/controller/ofswitch"
)

// renew adds again the leased flows the switch holds from us (dataplane.Renewals: reactive
// dispatch's flow to the controller), every Config.LeaseRefresh, when this controller may
// write to the switch. A standby, a leader whose term ended, or a controller that is gone
// renews nothing, so the switch's lease runs out and it serves new connections from the
// group alone (docs/dataplane.md, "Reactive dispatch"). It writes nothing when current is in
// doubt (a read-back is due): the next sync re-adds the flow if it lapsed.
func (s *Syncer) renew(ctx context.Context) {
	if !s.known || s.resync {
		return
	}
	msgs := dataplane.Renewals(s.current)
	if len(msgs) == 0 {
		return
	}
	term, write := s.role(ctx)
	if !write {
		return
	}
	if s.cfg.Lead != nil {
		if t, ok := s.cfg.Lead.Leading(); !ok || t != term {
			return
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 2*s.barrierTimeout())
	defer cancel()
	sw := s.cfg.Conn
	if _, err := sw.Apply(cctx, msgs); err != nil {
		s.resync = true // the next sync reads back and re-adds what lapsed
		if s.cfg.Lead != nil && ofswitch.IsSlave(err) {
			s.st.Role = "slave"
			s.contest(term, ContestIsSlave, fmt.Sprintf("switch %s refused a lease renewal as from a slave", sw))
			return
		}
		inc(s.cfg.Metrics.RewriteErrors)
		if !s.renewFailing {
			s.renewFailing = true
			s.cfg.Logger.Warn("lease renewal failed; will resync (logged once until a renewal succeeds)", "dpid", sw.String(), "flows", len(msgs), "err", err)
		}
		return
	}
	if s.renewFailing {
		s.renewFailing = false
		s.cfg.Logger.Info("lease renewal works again", "dpid", sw.String())
	}
}
