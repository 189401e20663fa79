package regfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is wrapped by the error for a path that is not a regular file.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is wrapped by the error for a file larger than the caller's bound.
var ErrTooLarge = errors.New("file too large")

// Open opens path for reading without blocking and returns it with its status, taken from
// the opened file (not the name, so a rename in between cannot swap what was checked). It
// refuses anything but a regular file. Errors are *fs.PathError naming path.
func Open(path string) (*os.File, fs.FileInfo, error) { return open(path, 0) }

// open is Open with extra open flags.
func open(path string, flags int) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|nonblock|flags, 0)
	if err != nil {
		if flags&nofollow != 0 && nofollow != 0 && errors.Is(err, syscall.ELOOP) {
			return nil, nil, &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w: it is a symbolic link", ErrNotRegular)}
		}
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, &fs.PathError{Op: "open", Path: path, Err: notRegular(fi.Mode())}
	}
	return f, fi, nil
}

// notRegular says what the file is instead.
func notRegular(m fs.FileMode) error {
	what := "a special file"
	switch {
	case m.IsDir():
		what = "a directory"
	case m&fs.ModeNamedPipe != 0:
		what = "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		what = "a socket"
	case m&fs.ModeCharDevice != 0:
		what = "a character device"
	case m&fs.ModeDevice != 0:
		what = "a block device"
	}
	return fmt.Errorf("%w: it is %s", ErrNotRegular, what)
}

// Read returns the content of the regular file at path, refusing one of more than max bytes.
func Read(path string, max int64) ([]byte, error) {
	data, _, err := ReadInfo(path, max)
	return data, err
}

// ReadInfo is Read that also returns the opened file's status, for callers that check its
// owner or mode.
func ReadInfo(path string, max int64) ([]byte, fs.FileInfo, error) { return readInfo(path, max, 0) }

// ReadInfoNoFollow is ReadInfo that refuses a symbolic link at path (ErrNotRegular), for a file
// that is only ever written by rename and lives in a directory someone less trusted than the
// reader can write: a link planted there would make the reader open whatever it points to.
func ReadInfoNoFollow(path string, max int64) ([]byte, fs.FileInfo, error) {
	return readInfo(path, max, nofollow)
}

func readInfo(path string, max int64, flags int) ([]byte, fs.FileInfo, error) {
	f, fi, err := open(path, flags)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	if int64(len(data)) > max {
		return nil, nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: more than %d bytes", ErrTooLarge, max)}
	}
	if data == nil {
		data = []byte{}
	}
	return data, fi, nil
}
