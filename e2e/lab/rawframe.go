package lab

import (
	"fmt"
	"net"
	"syscall"
)

// SendFrame transmits one raw Ethernet frame, exactly as given, out of the host's interface,
// as any machine on the segment could: hostile tests use it to forge frames (a spoofed ARP
// reply) that the host's kernel would never send.
func (h *Host) SendFrame(frame []byte) error {
	if len(frame) < 14 {
		return fmt.Errorf("host %s: frame of %d bytes is shorter than an Ethernet header", h.Name, len(frame))
	}
	err := inNetns("/run/netns/"+h.NS, func() error {
		ifi, err := net.InterfaceByName(HostIface)
		if err != nil {
			return err
		}
		// Protocol 0: a send-only packet socket, so nothing queues up on it.
		fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW, 0)
		if err != nil {
			return fmt.Errorf("packet socket: %w", err)
		}
		defer syscall.Close(fd)
		sa := &syscall.SockaddrLinklayer{Ifindex: ifi.Index, Halen: 6}
		copy(sa.Addr[:], frame[0:6])
		return syscall.Sendto(fd, frame, 0, sa)
	})
	if err != nil {
		return fmt.Errorf("host %s: send frame: %w", h.Name, err)
	}
	return nil
}
