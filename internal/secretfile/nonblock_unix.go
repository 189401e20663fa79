//go:build unix

package secretfile

import "syscall"

// nonblock keeps Open from hanging on a FIFO put where the secret should be; Stat then
// refuses it as not a regular file.
const nonblock = syscall.O_NONBLOCK
