//go:build unix

package main

import (
	"os"
	"syscall"
)

// sameOwner gives f the owner and group of like (nil: leaves f as created), so a file
// rewritten by root stays readable by the controller's user.
func sameOwner(f *os.File, like os.FileInfo) error {
	if like == nil {
		return nil
	}
	st, ok := like.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	return f.Chown(int(st.Uid), int(st.Gid))
}
