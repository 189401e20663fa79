package lab

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// Bridge is an Open vSwitch bridge on the userspace (netdev) datapath,
// speaking OpenFlow 1.3 only.
type Bridge struct {
	// Name is "PREFIX-NAME"; it also names the LOCAL tap device, which
	// never gets an address.
	Name string
	// DPID is the datapath id, fixed per lab (0xf1e0000000000000 | n for
	// the n-th bridge) so controller logs and tests can name it.
	DPID uint64
	ovs  *OVS
}

// DPIDBase is ORed with the bridge's 1-based index to form its datapath id.
const DPIDBase uint64 = 0xf1e0000000000000

// AddBridge creates bridge NAME with datapath_type=netdev,
// protocols=OpenFlow13, a fixed datapath id and in-band control disabled
// (no hidden flows). controller is an OVS target such as
// "tcp:127.0.0.1:6653", or "" for none; several targets separated by
// spaces ("tcp:127.0.0.1:6653 tcp:127.0.0.1:6654") give the bridge one
// controller each (ovs-vsctl set-controller takes a list; a target never
// contains a space), as controller high availability needs. failMode is
// "secure", "standalone" or "" (OVS default, standalone: NORMAL switching
// when no controller is connected).
func (o *OVS) AddBridge(name, controller, failMode string) (*Bridge, error) {
	switch failMode {
	case "", "secure", "standalone":
	default:
		return nil, fmt.Errorf("bridge %q: fail mode %q: want secure, standalone or empty", name, failMode)
	}
	l := o.lab
	full, err := l.claimName("bridge", name)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.nbridges++
	b := &Bridge{Name: full, DPID: DPIDBase | uint64(l.nbridges), ovs: o}
	l.mu.Unlock()
	if err := l.onClose("bridge "+full, func() error {
		_, err := o.Vsctl("--if-exists", "del-br", full)
		return err
	}); err != nil {
		return nil, err
	}
	args := []string{"add-br", full, "--", "set", "Bridge", full,
		"datapath_type=netdev", "protocols=OpenFlow13",
		fmt.Sprintf("other-config:datapath-id=%016x", b.DPID),
		"other-config:disable-in-band=true"}
	if failMode != "" {
		args = append(args, "fail_mode="+failMode)
	}
	if targets := strings.Fields(controller); len(targets) > 0 {
		args = append(append(args, "--", "set-controller", full), targets...)
	}
	if _, err := o.Vsctl(args...); err != nil {
		return nil, fmt.Errorf("bridge %q: %w\n%s", name, err, Tail(o.VswitchdLog(), 20))
	}
	if err := Poll(DaemonTimeout, func() error { _, err := b.Ofctl("show"); return err }); err != nil {
		return nil, fmt.Errorf("bridge %q: not answering OpenFlow: %w", name, err)
	}
	o.mu.Lock()
	o.bridges = append(o.bridges, b)
	o.mu.Unlock()
	l.mu.Lock()
	l.bridges = append(l.bridges, b)
	l.mu.Unlock()
	l.Log.Info("bridge", "name", full, "dpid", fmt.Sprintf("%016x", b.DPID), "controller", controller, "fail_mode", failMode)
	return b, nil
}

// Mgmt is the bridge's OpenFlow management socket, usable as an ovs-ofctl
// target ("unix:" + Mgmt()).
func (b *Bridge) Mgmt() string { return filepath.Join(b.ovs.RunDir, b.Name+".mgmt") }

// OVS returns the switch the bridge lives on.
func (b *Bridge) OVS() *OVS { return b.ovs }

// Ofctl runs `ovs-ofctl -O OpenFlow13 CMD unix:MGMT ARGS...` where
// args[0] is CMD, e.g. b.Ofctl("add-flow", "priority=0,actions=NORMAL").
func (b *Bridge) Ofctl(args ...string) (string, error) {
	if len(args) == 0 {
		return "", errors.New("ofctl: no command")
	}
	full := append([]string{"-O", "OpenFlow13", args[0], "unix:" + b.Mgmt()}, args[1:]...)
	out, err := b.ovs.lab.run(b.ovs.env(), "ovs-ofctl", full...)
	if err != nil {
		return out, fmt.Errorf("bridge %s: %w", b.Name, err)
	}
	return out, nil
}

// DumpFlows returns `ovs-ofctl dump-flows` output.
func (b *Bridge) DumpFlows() (string, error) { return b.Ofctl("dump-flows") }

// DumpGroups returns `ovs-ofctl dump-groups` output.
func (b *Bridge) DumpGroups() (string, error) { return b.Ofctl("dump-groups") }

// GroupWeights reads the buckets of group id from the switch itself, the
// ground truth a controller test compares its intent with.
func (b *Bridge) GroupWeights(id uint32) ([]BucketWeight, error) {
	out, err := b.DumpGroups()
	if err != nil {
		return nil, err
	}
	groups, err := ParseGroups(out)
	if err != nil {
		return nil, fmt.Errorf("bridge %s: %w", b.Name, err)
	}
	for _, g := range groups {
		if g.ID == id {
			return g.Buckets, nil
		}
	}
	return nil, fmt.Errorf("bridge %s: group %d not found (have %d groups)", b.Name, id, len(groups))
}

// Ports returns `ovs-vsctl list-ports` of the bridge.
func (b *Bridge) Ports() ([]string, error) {
	out, err := b.ovs.Vsctl("list-ports", b.Name)
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}
