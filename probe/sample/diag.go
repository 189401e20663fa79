package sample

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// SockDiag counts established TCP sockets by asking the kernel through NETLINK_SOCK_DIAG
// (sock_diag(7)): one dump per address family, filtered by the kernel to the ESTABLISHED state,
// with no extensions requested, so each socket costs the kernel one 72-byte message and the
// probe a port lookup. /proc/net/tcp instead prints every socket of every state as text. The
// netlink socket and the receive buffer are kept between samples; Close releases them.
//
// It sees the network namespace of the thread that created its socket (the probe's).
type SockDiag struct {
	// Timeout bounds each receive; default 2 s.
	Timeout time.Duration
	// States is the set of TCP states counted, as bits 1<<state (the kernel's numbering);
	// 0 counts ESTABLISHED only. The in-flight count adds CLOSE_WAIT (StatesInFlight).
	States uint32

	fd       int // 0: not open
	buf      []byte
	seq      uint32
	noCompat bool // the kernel refused TCPDIAG_GETSOCK
}

// familyBoth asks dump for the compat request, which covers IPv4 and IPv6 in one walk.
const familyBoth = unix.AF_UNSPEC

// states is the idiag_states mask of the dump.
func (d *SockDiag) states() uint32 {
	if d.States == 0 {
		return 1 << tcpEstablished
	}
	return d.States
}

// diagSeq makes the sequence numbers of different SockDiag values distinct, for the logs.
var diagSeq atomic.Uint32

// sock_diag(7) and linux/inet_diag.h.
const (
	sockDiagByFamily = 20 // SOCK_DIAG_BY_FAMILY
	tcpDiagGetSock   = 18 // TCPDIAG_GETSOCK, the original request, answered in its own type
	sizeofDiagReq    = 56 // struct inet_diag_req_v2
	sizeofCompatReq  = 60 // struct inet_diag_req
	sizeofDiagMsg    = 72 // struct inet_diag_msg
	diagBufSize      = 64 << 10
	maxDumpRetries   = 3 // NLM_F_DUMP_INTR: the table changed during the dump
	// maxDumpDatagrams bounds one dump: 1<<20 datagrams of 64 KiB hold far more sockets than
	// a kernel can have, so reaching it means something else is feeding the socket.
	maxDumpDatagrams = 1 << 20
)

// ErrDumpInterrupted is returned when every try of a dump was interrupted by changes to the
// socket table (NLM_F_DUMP_INTR), so the count may be inconsistent.
var ErrDumpInterrupted = errors.New("sock_diag dump interrupted by socket table changes")

// Count returns the number of ESTABLISHED TCP sockets, IPv4 and IPv6, whose local port is in
// ports. A family the kernel does not have (IPv6 disabled) counts 0.
func (d *SockDiag) Count(ports *PortSet) (uint32, error) {
	if d.fd == 0 {
		if err := d.open(); err != nil {
			return 0, err
		}
	}
	if !d.noCompat {
		n, err := d.retry(familyBoth, ports)
		switch {
		case err == nil:
			return n, nil
		case errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT):
			d.noCompat = true // a kernel without the compat request: one dump per family
		default:
			d.Close()
			return 0, err
		}
	}
	var total uint32
	for _, family := range [...]uint8{unix.AF_INET, unix.AF_INET6} {
		n, err := d.retry(family, ports)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EAFNOSUPPORT) {
			continue // no such family in this kernel
		}
		if err != nil {
			// The socket may hold the rest of a failed dump: start afresh next time.
			d.Close()
			return 0, err
		}
		total += n
	}
	return total, nil
}

// retry dumps, again while the dump is interrupted by changes to the table.
func (d *SockDiag) retry(family uint8, ports *PortSet) (n uint32, err error) {
	for range maxDumpRetries {
		if n, err = d.dump(family, ports); !errors.Is(err, ErrDumpInterrupted) {
			break
		}
	}
	return n, err
}

func (d *SockDiag) open() error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return fmt.Errorf("sock_diag: netlink socket: %w", err)
	}
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	tv := unix.NsecToTimeval(timeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return fmt.Errorf("sock_diag: SO_RCVTIMEO: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return fmt.Errorf("sock_diag: bind: %w", err)
	}
	d.fd = fd
	if d.seq == 0 {
		d.seq = diagSeq.Add(1) << 16
	}
	if len(d.buf) < diagBufSize {
		d.buf = make([]byte, diagBufSize)
	}
	return nil
}

// Close releases the netlink socket; the next Count opens a new one.
func (d *SockDiag) Close() error {
	if d.fd == 0 {
		return nil
	}
	err := unix.Close(d.fd)
	d.fd = 0
	return err
}

// dump sends one request for family and counts the answers.
func (d *SockDiag) dump(family uint8, ports *PortSet) (uint32, error) {
	d.seq++
	var buf [unix.SizeofNlMsghdr + sizeofCompatReq]byte
	var req []byte
	if family == familyBoth {
		req = appendCompatDiagRequest(buf[:0], d.seq, d.states())
	} else {
		req = appendDiagRequest(buf[:0], d.seq, family, d.states())
	}
	if err := unix.Sendto(d.fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, fmt.Errorf("sock_diag: send: %w", err)
	}
	var total uint32
	interrupted := false
	for range maxDumpDatagrams {
		n, from, err := unix.Recvfrom(d.fd, d.buf, 0)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) {
				err = os.ErrDeadlineExceeded
			}
			return 0, fmt.Errorf("sock_diag: receive: %w", err)
		}
		if sa, ok := from.(*unix.SockaddrNetlink); !ok || sa.Pid != 0 {
			continue // not from the kernel
		}
		c, done, intr, err := countDiagMessages(d.buf[:n], d.seq, ports, d.states())
		total += c
		interrupted = interrupted || intr
		switch {
		case err != nil:
			return 0, err
		case done && interrupted:
			return 0, ErrDumpInterrupted
		case done:
			return total, nil
		}
	}
	return 0, fmt.Errorf("sock_diag: no end of dump after %d datagrams", maxDumpDatagrams)
}

// AppendDiagRequest appends a netlink message asking for a dump of the ESTABLISHED TCP
// sockets of family (unix.AF_INET or AF_INET6) with no extensions: struct nlmsghdr followed by
// struct inet_diag_req_v2, in the host's byte order as netlink wants.
func AppendDiagRequest(b []byte, seq uint32, family uint8) []byte {
	return appendDiagRequest(b, seq, family, 1<<tcpEstablished)
}

func appendDiagRequest(b []byte, seq uint32, family uint8, states uint32) []byte {
	ne := binary.NativeEndian
	b = ne.AppendUint32(b, unix.SizeofNlMsghdr+sizeofDiagReq)
	b = ne.AppendUint16(b, sockDiagByFamily)
	b = ne.AppendUint16(b, unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	b = ne.AppendUint32(b, seq)
	b = ne.AppendUint32(b, 0) // port id: the kernel fills in the sender's
	b = append(b, family, unix.IPPROTO_TCP, 0, 0)
	b = ne.AppendUint32(b, states) // idiag_states
	return append(b, make([]byte, sizeofDiagReq-8)...)
}

// AppendCompatDiagRequest appends the original inet_diag request (TCPDIAG_GETSOCK with struct
// inet_diag_req) for the ESTABLISHED TCP sockets. The kernel answers it for both address
// families in one walk of its socket hash (inet_diag_dump_compat sets the family to
// AF_UNSPEC), where SOCK_DIAG_BY_FAMILY needs one request, and one walk, per family: IPv4 and
// IPv6 TCP sockets share that hash, which has 262144 buckets on the lab machine.
func AppendCompatDiagRequest(b []byte, seq uint32) []byte {
	return appendCompatDiagRequest(b, seq, 1<<tcpEstablished)
}

func appendCompatDiagRequest(b []byte, seq, states uint32) []byte {
	ne := binary.NativeEndian
	b = ne.AppendUint32(b, unix.SizeofNlMsghdr+sizeofCompatReq)
	b = ne.AppendUint16(b, tcpDiagGetSock)
	b = ne.AppendUint16(b, unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	b = ne.AppendUint32(b, seq)
	b = ne.AppendUint32(b, 0)
	b = append(b, unix.AF_INET, 0, 0, 0) // family (ignored), src_len, dst_len, ext
	b = append(b, make([]byte, 48)...)   // struct inet_diag_sockid
	b = ne.AppendUint32(b, states)
	return ne.AppendUint32(b, 0) // idiag_dbs
}

// CountDiagMessages counts the inet_diag_msg answers in one datagram of a sock_diag dump that
// are ESTABLISHED and whose local port (idiag_sport, network byte order) is in ports. done is
// true at NLMSG_DONE; interrupted reports NLM_F_DUMP_INTR on any message. Messages of another
// sequence number (a late answer to an earlier, abandoned dump) are skipped. An NLMSG_ERROR
// is returned as its errno; a truncated or malformed message is an error.
func CountDiagMessages(b []byte, seq uint32, ports *PortSet) (n uint32, done, interrupted bool, err error) {
	return countDiagMessages(b, seq, ports, 1<<tcpEstablished)
}

// countDiagMessages is CountDiagMessages for the sockets in any of states (bits 1<<state).
func countDiagMessages(b []byte, seq uint32, ports *PortSet, states uint32) (n uint32, done, interrupted bool, err error) {
	ne := binary.NativeEndian
	for len(b) > 0 {
		if len(b) < unix.SizeofNlMsghdr {
			return n, false, interrupted, fmt.Errorf("sock_diag: %d bytes left, shorter than a message header", len(b))
		}
		l := ne.Uint32(b[0:4])
		typ, flags, mseq := ne.Uint16(b[4:6]), ne.Uint16(b[6:8]), ne.Uint32(b[8:12])
		if l < unix.SizeofNlMsghdr || uint64(l) > uint64(len(b)) {
			return n, false, interrupted, fmt.Errorf("sock_diag: message length %d with %d bytes left", l, len(b))
		}
		msg := b[unix.SizeofNlMsghdr:l]
		next := min(int(l+3)&^3, len(b)) // NLMSG_ALIGN
		b = b[next:]
		if mseq != seq {
			continue
		}
		if flags&unix.NLM_F_DUMP_INTR != 0 {
			interrupted = true
		}
		switch typ {
		case unix.NLMSG_DONE:
			return n, true, interrupted, nil
		case unix.NLMSG_ERROR:
			if len(msg) < 4 {
				return n, false, interrupted, errors.New("sock_diag: short error message")
			}
			if errno := int32(ne.Uint32(msg[0:4])); errno != 0 {
				return n, false, interrupted, fmt.Errorf("sock_diag: %w", unix.Errno(-errno))
			}
			return n, true, interrupted, nil // an acknowledgement
		case sockDiagByFamily, tcpDiagGetSock:
			if len(msg) < sizeofDiagMsg {
				return n, false, interrupted, fmt.Errorf("sock_diag: socket message of %d bytes, want %d", len(msg), sizeofDiagMsg)
			}
			// idiag_family, idiag_state, idiag_timer, idiag_retrans, then the socket id,
			// which starts with the source (local) port in network byte order.
			if msg[1] < 32 && states&(1<<msg[1]) != 0 && ports.Has(binary.BigEndian.Uint16(msg[4:6])) {
				n++
			}
		}
	}
	return n, false, interrupted, nil
}
