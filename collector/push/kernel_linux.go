package push

import (
	"encoding/binary"
	"net"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// skfNetOff is SKF_NET_OFF: a classic BPF load at this offset plus k reads
// byte k of the network (IP) header; plain offsets start at the UDP header.
const skfNetOff = 0xfff00000 // -0x100000 as the uint32 field

// dropFilter compiles a socket filter that drops datagrams whose IPv4
// source, or IPv6 source /64, is one of addrs, and passes everything else.
// Two instructions an address keep every jump short.
func dropFilter(addrs []netip.Addr) []unix.SockFilter {
	var v4, v6 []netip.Addr
	for _, a := range addrs {
		if a.Is4() {
			v4 = append(v4, a)
		} else {
			v6 = append(v6, a)
		}
	}
	const (
		ld   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		ldb  = unix.BPF_LD | unix.BPF_B | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		rsh  = unix.BPF_ALU | unix.BPF_RSH | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
		pass = 0xffffffff
	)
	// v4 block: ld src; (jeq a, 0, 1; ret 0)*; ret pass
	v4Block := []unix.SockFilter{{Code: ld, K: skfNetOff + 12}}
	for _, a := range v4 {
		b := a.As4()
		v4Block = append(v4Block, unix.SockFilter{Code: jeq, Jt: 0, Jf: 1, K: binary.BigEndian.Uint32(b[:])}, unix.SockFilter{Code: ret, K: 0})
	}
	v4Block = append(v4Block, unix.SockFilter{Code: ret, K: pass})
	// v6 block: (ld src[0:4]; jeq hi, 0, 3; ld src[4:8]; jeq lo, 0, 1; ret 0)*; ret pass
	var v6Block []unix.SockFilter
	for _, a := range v6 {
		b := a.As16()
		v6Block = append(v6Block,
			unix.SockFilter{Code: ld, K: skfNetOff + 8},
			unix.SockFilter{Code: jeq, Jt: 0, Jf: 3, K: binary.BigEndian.Uint32(b[0:4])},
			unix.SockFilter{Code: ld, K: skfNetOff + 12},
			unix.SockFilter{Code: jeq, Jt: 0, Jf: 1, K: binary.BigEndian.Uint32(b[4:8])},
			unix.SockFilter{Code: ret, K: 0})
	}
	v6Block = append(v6Block, unix.SockFilter{Code: ret, K: pass})
	// Dispatch on the IP version nibble; the v4 block follows directly.
	prog := []unix.SockFilter{
		{Code: ldb, K: skfNetOff},
		{Code: rsh, K: 4},
	}
	if len(v4Block) > 255 {
		panic("push: drop list too long for a short jump") // maxKernelDrops keeps it short
	}
	prog = append(prog, unix.SockFilter{Code: jeq, Jt: uint8(len(v4Block)), Jf: 0, K: 6})
	prog = append(prog, v4Block...)
	return append(prog, v6Block...)
}

// setDropList installs the filter for addrs on conn (replacing the one
// before, atomically), or detaches it when addrs is empty.
func setDropList(conn *net.UDPConn, addrs []netip.Addr) error {
	rc, err := conn.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		if len(addrs) == 0 {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_DETACH_FILTER, 0)
			if serr == unix.ENOENT {
				serr = nil
			}
			return
		}
		prog := dropFilter(addrs)
		serr = unix.SetsockoptSockFprog(int(fd), unix.SOL_SOCKET, unix.SO_ATTACH_FILTER,
			&unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]})
	})
	if err != nil {
		return err
	}
	return serr
}

// soMeminfo is SO_MEMINFO, and skMeminfoDrops the index of sk_drops in
// its answer: datagrams the kernel dropped for this socket (buffer full or
// refused by the filter).
const (
	soMeminfo      = 55
	skMeminfoDrops = 8
	skMeminfoVars  = 9
)

// kernelDrops reads sk_drops of conn; ok is false where the kernel does
// not say.
func kernelDrops(conn *net.UDPConn) (n uint32, ok bool) {
	rc, err := conn.SyscallConn()
	if err != nil {
		return 0, false
	}
	var buf [skMeminfoVars]uint32
	_ = rc.Control(func(fd uintptr) {
		l := uint32(len(buf) * 4)
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.SOL_SOCKET, soMeminfo,
			uintptr(unsafe.Pointer(&buf)), uintptr(unsafe.Pointer(&l)), 0)
		ok = e == 0 && l >= (skMeminfoDrops+1)*4
	})
	return buf[skMeminfoDrops], ok
}

// kernelSupported: the drop list works here (its tests are in droplist_linux_test.go).
const kernelSupported = true
