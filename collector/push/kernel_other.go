//go:build !linux

package push

import (
	"errors"
	"net"
	"net/netip"
)

// setDropList needs a Linux socket filter; elsewhere shedding stays in the
// read loop.
func setDropList(*net.UDPConn, []netip.Addr) error { return errors.ErrUnsupported }

func kernelDrops(*net.UDPConn) (uint32, bool) { return 0, false }

const kernelSupported = false
