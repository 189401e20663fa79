// Package cfgwatch tells the controller when its configuration file (and the files that
// qualify a reload, such as the -allow-removal marker) has new content, and hands it that
// content read once, whole.
//
// It watches directories through github.com/fsnotify/fsnotify (inotify on Linux) rather than
// polling size and modification time: an atomic rename, an editor's replace or a symlink swap
// (a Kubernetes ConfigMap's ..data) can leave both unchanged, and a poll can read a file half
// written. A burst of events is debounced, only names on the way to a watched file count, and
// a read whose content equals what was last delivered is dropped. fsnotify reports no
// close-write, so a file written in place is delivered once two reads a Debounce apart agree
// (a rename into place or a symlink swap is complete at once). Where notifications are
// missing it polls the content, and delivers a change only once two polls agree.
//
// It owns the fsnotify watcher and nothing else: it does not parse what it reads, and must
// not import the configuration or the balancer (internal/layers checks).
package cfgwatch
