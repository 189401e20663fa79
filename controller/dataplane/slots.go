package dataplane

import (
	"fmt"
	"strings"

	"flowweight/internal/slots"
)

// The model of Open vSwitch's slot table, and how computed weights are apportioned to it,
// live in internal/slots, a function of plain weights that the simulator shares; this file is
// where the planner meets the switch's version.

// OVSVersion is an Open vSwitch release (internal/slots.Version), as a switch's OFPMP_DESC
// names it; Options.OVS carries it.
type OVSVersion = slots.Version

// LayoutSlots is the slot-table size the controller lays groups out for on Open vSwitch v: 256
// from 2.17, 64 for older and unknown switches (slots.Size).
func LayoutSlots(v OVSVersion) int { return slots.Size(v) }

// SwitchVersion reads the Open vSwitch version from a switch's OFPMP_DESC hardware and
// software descriptions ("Open vSwitch", "3.1.0"). Any other switch, or a software
// description that is not a version, is unknown: the error says why, for the one log line
// that explains the 64-slot layout.
func SwitchVersion(hardware, software string) (OVSVersion, error) {
	if strings.TrimSpace(hardware) != "Open vSwitch" {
		return OVSVersion{}, fmt.Errorf("switch hardware %q is not Open vSwitch", hardware)
	}
	return slots.ParseVersion(software)
}
