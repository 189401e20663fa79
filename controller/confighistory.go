package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"time"

	"flowweight/controller/history"
	"flowweight/controller/state"
	"flowweight/internal/regfile"
)

// configHistory records every configuration the running controller applies (at start and at
// each applied reload) in the history next to the state file, for `controller history` and
// `controller rollback`. A failure to record is logged, naming the directory, and changes
// nothing else: the configuration is applied all the same and the versions kept stay.
type configHistory struct {
	store   history.Store
	request string // where a waiting rollback leaves its history.Request
	log     *slog.Logger
}

// newConfigHistory is nil when the controller keeps no state file (-state ""): it then keeps
// nothing across restarts, its history included.
func newConfigHistory(statePath string, log *slog.Logger) *configHistory {
	if statePath == "" {
		return nil
	}
	return &configHistory{store: history.Store{Dir: history.DirFor(statePath)}, request: history.RequestFor(statePath), log: log}
}

// applied records content, read from file and applied because of source, keeping the newest
// keep versions. When a rollback asked for this content, the source says so and the request
// is done.
func (h *configHistory) applied(file string, content []byte, source string, keep int) {
	if h == nil {
		return
	}
	if r := h.pending(content); r != nil {
		source = fmt.Sprintf("rollback to version %d", r.Version)
		if err := os.Remove(h.request); err != nil && !errors.Is(err, fs.ErrNotExist) {
			h.log.Warn("rollback request not removed; it expires by itself", "file", h.request, "err", err)
		}
	}
	e, added, err := h.store.Record(content, source, file, time.Now(), keep)
	if err != nil {
		h.log.Error("configuration history not written; the configuration is applied all the same", "dir", h.store.Dir, "err", err)
		return
	}
	if added {
		h.log.Info("configuration version recorded", "version", e.Number, "sha256", e.Short(), "source", source, "dir", h.store.Dir)
	}
}

// refused tells a waiting rollback that the controller refused its content, and why, so that
// the command can put the configuration file back.
func (h *configHistory) refused(content []byte, why error) {
	if h == nil {
		return
	}
	r := h.pending(content)
	if r == nil {
		return
	}
	r.Refused = clip(why.Error(), 2000)
	data, err := history.EncodeRequest(r)
	if err == nil {
		err = state.WriteFileAtomic(h.request, data, 0o644)
	}
	if err != nil {
		h.log.Warn("rollback request: the refusal not written back; the command times out and puts the file back", "file", h.request, "err", err)
	}
}

// retry reports whether content, refused when last tried, is asked for again by a rollback
// that has not been answered yet: the command retried after fixing what the refusal named (a
// key file's owner, say) gets a fresh answer instead of waiting out its -wait for a reload
// the watcher skipped as "the same refused content again". A request answered (Refused set)
// asks for nothing more, so a refusal is never retried in a loop.
func (h *configHistory) retry(content []byte) bool {
	if h == nil {
		return false
	}
	r := h.pending(content)
	return r != nil && r.Refused == ""
}

// pending is the rollback request for content, nil when there is none (or it asks for other
// content, or has expired, or cannot be read).
func (h *configHistory) pending(content []byte) *history.Request {
	data, err := regfile.Read(h.request, history.MaxRequestSize)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			h.log.Warn("rollback request unreadable; ignored", "file", h.request, "err", err)
		}
		return nil
	}
	r, err := history.DecodeRequest(data)
	if err != nil {
		h.log.Warn("rollback request ignored: not a request file", "file", h.request, "err", err)
		return nil
	}
	if !r.Matches(sha256Hex(content), time.Now()) {
		return nil
	}
	return r
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// clip keeps at most max bytes of s, valid UTF-8.
func clip(s string, max int) string {
	if len(s) > max {
		s = strings.ToValidUTF8(s[:max], "") + "..."
	}
	return s
}
