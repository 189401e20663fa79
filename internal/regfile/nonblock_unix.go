//go:build unix

package regfile

import "syscall"

// nonblock keeps open from waiting for a FIFO's writer; Stat then refuses the FIFO.
const nonblock = syscall.O_NONBLOCK

// nofollow makes open refuse a symbolic link as the last element (ELOOP).
const nofollow = syscall.O_NOFOLLOW
