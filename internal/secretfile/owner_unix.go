//go:build unix

package secretfile

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// CheckOwner refuses a file (or directory) that neither this process's user nor root owns:
// its owner could change it at will, whatever its mode says.
func CheckOwner(fi fs.FileInfo) error { return checkOwner(fi, -1) }

// checkOwner is CheckOwner that also accepts the owner uid also (-1: none).
func checkOwner(fi fs.FileInfo, also int) error {
	uid := ownerOf(fi)
	if me := os.Geteuid(); uid >= 0 && uid != me && uid != 0 && uid != also {
		if also >= 0 {
			return fmt.Errorf("owned by uid %d, not by this process's user (uid %d), root or the state directory's owner (uid %d); chown it", uid, me, also)
		}
		return fmt.Errorf("owned by uid %d, not by this process's user (uid %d) or root; chown it", uid, me)
	}
	return nil
}

// ownerOf is fi's owner's uid, -1 where the system does not say.
func ownerOf(fi fs.FileInfo) int {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return -1
	}
	return int(st.Uid)
}
