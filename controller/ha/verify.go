package ha

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Verify asks etcd whether this controller still leads in term, because something that is
// not the election (a switch: a stale role reply, a role status, an IS_SLAVE error) said
// another controller does. Only etcd's answer deposes: if the election's first key is no
// longer ours, or was created in a later term, the controller steps down (StepDown); if it is
// ours, the claim is logged and ignored. A switch is one unauthenticated TCP connection unless
// the controller requires TLS with certificates naming the datapath, and one fake switch must
// not depose every leader in turn. If etcd does not answer, nothing happens here: ValidUntil
// stops the writes anyway.
//
// Verify does not block. At most one check runs at a time; claims arriving meanwhile are
// answered by one more check after it, so a flood of claims costs one read at a time.
func (e *Elector) Verify(term uint64, reason string) {
	e.mu.Lock()
	if e.verifying {
		e.verifyAgain = verifyRequest{term: term, reason: reason, set: true}
		e.mu.Unlock()
		return
	}
	e.verifying = true
	e.mu.Unlock()
	go func() {
		req := verifyRequest{term: term, reason: reason, set: true}
		for req.set {
			e.verifyOnce(req.term, req.reason)
			e.mu.Lock()
			req, e.verifyAgain = e.verifyAgain, verifyRequest{}
			if !req.set {
				e.verifying = false
			}
			e.mu.Unlock()
		}
	}()
}

// verifyRequest is a claim waiting for the check in progress.
type verifyRequest struct {
	term   uint64
	reason string
	set    bool
}

func (e *Elector) verifyOnce(term uint64, reason string) {
	e.mu.Lock()
	ours := e.leaderKey
	e.mu.Unlock()
	if c := e.Current(); !c.Leader || c.Term != term || ours == "" {
		return // not leading in that term any more: nothing to give up
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.DialTimeout)
	defer cancel()
	// A linearizable read: it reflects every election write etcd has committed.
	resp, err := e.client.Get(ctx, e.electionPrefix+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		e.log.Warn("could not ask etcd whether we still lead; a switch says we do not", "term", term, "reason", reason, "err", err)
		return
	}
	var first string
	var rev int64
	if len(resp.Kvs) > 0 {
		first, rev = string(resp.Kvs[0].Key), resp.Kvs[0].CreateRevision
	}
	if why := superseded(ours, term, first, rev); why != "" {
		e.StepDown(term, reason+"; etcd confirms: "+why)
		return
	}
	e.log.Warn("a switch says another controller is master, but etcd confirms this controller leads: not stepping down",
		"term", term, "reason", reason)
}

// superseded says why the election no longer has us (our key ours, created in term) as its
// leader, given its first key and that key's create revision ("" for none); "" if it still
// does.
func superseded(ours string, term uint64, first string, rev int64) string {
	switch {
	case first == "":
		return "no controller holds the election, our key is gone"
	case first != ours:
		return fmt.Sprintf("the leader key is now %s (term %d)", first, rev)
	case uint64(rev) != term:
		return fmt.Sprintf("our key was created again, in term %d", rev)
	}
	return ""
}
