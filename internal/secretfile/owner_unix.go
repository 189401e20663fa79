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
func CheckOwner(fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if me := os.Geteuid(); int(st.Uid) != me && st.Uid != 0 {
		return fmt.Errorf("owned by uid %d, not by this process's user (uid %d) or root; chown it", st.Uid, me)
	}
	return nil
}
