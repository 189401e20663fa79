package sample

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// Reread reads one kernel-generated file (/proc/stat, /proc/meminfo, a PSI file, a sysfs
// attribute) again and again through a descriptor kept open between samples: a pread at
// offset 0 into a buffer kept as well. The kernel generates such a file afresh on every read
// from offset 0, so the bytes are those os.ReadFile would return, without the open, the
// registration with Go's poller, the final read of end-of-file and the close that
// os.ReadFile costs each time: about 8 system calls per file and interval (strace of the
// probe at a 1 s interval, docs/benchmarks.md).
//
// A failed read closes the descriptor and opens the path again at once, so that a cgroup
// file whose cgroup was removed (its old descriptor answers ENODEV) reads as missing
// (fs.ErrNotExist), or is found again when the cgroup was created again, as with os.ReadFile.
// Not for regular files, which can be removed or replaced by a rename (a pidfile) while the
// kept descriptor goes on reading the old content.
//
// The descriptor is opened blocking and outside Go's poller (these files never block), held
// by an *os.File so that it is closed if the Reread is dropped without Close.
//
// Set Path; not safe for concurrent use.
type Reread struct {
	Path string

	f   *os.File
	buf []byte
}

// rereadMinBuf holds a /proc/stat of a few dozen CPUs or a /proc/meminfo in one read;
// rereadMaxBuf bounds the buffer, so that a path to something endless (a device, a FIFO fed
// forever) fails instead of growing the probe without end. /proc/stat of 8,192 CPUs is
// about 1.5 MiB.
const (
	rereadMinBuf = 8 << 10
	rereadMaxBuf = 16 << 20
)

// Read returns the file's current content, valid until the next Read or Close.
func (r *Reread) Read() ([]byte, error) {
	if r.f != nil {
		if b, err := r.read(); err == nil {
			return b, nil
		}
		r.Close() // stale (a removed cgroup's file) or broken: open the path again
	}
	fd, err := unix.Open(r.Path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: r.Path, Err: err}
	}
	r.f = os.NewFile(uintptr(fd), r.Path)
	b, err := r.read()
	if err != nil {
		r.Close()
		return nil, err
	}
	return b, nil
}

// read reads the whole file from offset 0 with one pread. A read that does not fill the
// buffer is the whole file: these files are generated in one piece and a read returns all of
// it that fits (os.File.ReadAt would read on to end-of-file, one more system call). One that
// fills it is read again, from 0, into a buffer twice the size, so that the content is always
// one generation of the file, never the start of one and the end of the next.
func (r *Reread) read() ([]byte, error) {
	if len(r.buf) < rereadMinBuf {
		r.buf = make([]byte, rereadMinBuf)
	}
	fd := int(r.f.Fd()) // a blocking descriptor: Fd changes nothing
	defer runtime.KeepAlive(r.f)
	for {
		n, err := unix.Pread(fd, r.buf, 0)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return nil, &os.PathError{Op: "read", Path: r.Path, Err: err}
		case n < len(r.buf):
			return r.buf[:n], nil
		}
		if 2*len(r.buf) > rereadMaxBuf {
			return nil, &os.PathError{Op: "read", Path: r.Path, Err: fmt.Errorf("larger than %d bytes", rereadMaxBuf)}
		}
		r.buf = make([]byte, 2*len(r.buf))
	}
}

// Close releases the descriptor; the next Read opens the path again.
func (r *Reread) Close() error {
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}
