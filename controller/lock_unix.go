//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockDir takes an exclusive lock on the directory dir (flock, not waiting), so that two
// rollbacks cannot interleave: each would put back, on failure, a file the other had
// replaced. The lock is on the directory itself, so nothing is created in a directory that
// the controller's user owns (a name planted there could point anywhere). The returned func
// releases it.
func lockDir(dir string) (func(), error) {
	f, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another rollback is running (it holds the lock on %s); wait for it", dir)
		}
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return func() { f.Close() }, nil
}
