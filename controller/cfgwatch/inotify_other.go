//go:build !linux

package cfgwatch

import "errors"

// inotify is Linux's; elsewhere the watcher polls.
type inotify struct{}

func newInotify([]string) (*inotify, error) { return nil, errors.New("inotify is Linux only") }
func (*inotify) close()                     {}
func (*inotify) watch([]string) error       { return nil }
func (*inotify) read(chan<- bool) error     { select {} }
