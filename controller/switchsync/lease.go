package switchsync

import (
	"context"
	"fmt"

	"flowweight/controller/dataplane"
	"flowweight/controller/ofswitch"

	"github.com/netrack/openflow/ofp"
)

// renew adds again the leased flows the switch holds from us (dataplane.Renewals: reactive
// dispatch's flow to the controller), every Config.LeaseRefresh, while this controller is
// confirmed as the switch's writer. A standby, a leader whose term ended, or a controller that
// is gone renews nothing, so the switch's lease runs out and it serves new connections from
// the group alone (docs/dataplane.md, "Reactive dispatch").
//
// A renewal never changes our role and never writes what is in doubt: asking for MASTER in a
// new term, or a read-back that is due, is the next sync's work (it re-adds the flow if it
// lapsed meanwhile); renewing from the old term's belief could restore a flow the new term's
// intent removed.
func (s *Syncer) renew(ctx context.Context) {
	if !s.known || s.resync {
		return
	}
	term, ok := s.confirmedWriter()
	if !ok {
		return
	}
	msgs := dataplane.Renewals(s.current)
	if len(msgs) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 2*s.barrierTimeout())
	defer cancel()
	sw := s.cfg.Conn
	if _, err := sw.Apply(cctx, msgs); err != nil {
		// Read back at once, not at the next intent: a lapse under a live controller costs
		// new connections the time the group serves them.
		s.resync = true
		select {
		case s.wake <- struct{}{}:
		default:
		}
		if s.cfg.Lead != nil && ofswitch.IsSlave(err) {
			// The term the switch confirmed and refused, not whatever the election says by now.
			s.st.Role = "slave"
			s.contest(term, ContestIsSlave, fmt.Sprintf("switch %s refused a lease renewal as from a slave", sw))
			return
		}
		inc(s.cfg.Metrics.RewriteErrors)
		if !s.renewFailing {
			s.renewFailing = true
			s.cfg.Logger.Warn("lease renewal failed; reading back (logged once until a renewal succeeds)", "dpid", sw.String(), "flows", len(msgs), "err", err)
		}
		return
	}
	if s.renewFailing {
		s.renewFailing = false
		s.cfg.Logger.Info("lease renewal works again", "dpid", sw.String())
	}
}

// confirmedWriter reports, without asking the switch anything, whether we may write to it
// now, and in which term: always without HA (term 0); with HA only as the leader of the
// current term that the switch confirmed as MASTER with that term's generation id and still
// has as MASTER (contest clears s.master, so a contested term fails here too).
func (s *Syncer) confirmedWriter() (term uint64, ok bool) {
	if s.cfg.Lead == nil {
		return 0, true
	}
	term, lead := s.cfg.Lead.Leading()
	if !lead || s.master != term {
		return 0, false
	}
	r := s.cfg.Conn.Role()
	return term, r.Role == ofp.ControllerRoleMaster && r.GenerationID == term
}
