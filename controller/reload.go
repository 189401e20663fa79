package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"flowweight/controller/balancer"
	"flowweight/controller/cfgwatch"
	"flowweight/controller/config"
	"flowweight/controller/state"
	"flowweight/internal/regfile"
)

// defaultState is systemd's StateDirectory for the unit (configs/flowweight-controller.service):
// the one place ProtectSystem=strict lets the controller write, which outlives restarts and
// reboots, and not /etc, which holds what the operator wrote rather than what the controller
// learned.
const defaultState = "/var/lib/flowweight/controller.state"

// confirmPath is where `reload -allow-removal` leaves its confirmation: next to the state file,
// which the controller can write (and so remove a used confirmation) and an operator can reach
// even when the configuration directory is a read-only ConfigMap mount.
func confirmPath(cfgPath, statePath string) string {
	if statePath == "" {
		return cfgPath + ".allow-removal"
	}
	return statePath + ".allow-removal"
}

// configWatch reloads the configuration when its content changes (or a removal confirmation
// appears) and on SIGHUP. It reads each file once per reload and never applies content it has
// already applied, or already refused without a new confirmation.
type configWatch struct {
	b       *balancer.Balancer
	also    balancer.Reloadable // the API server; nil when it is off
	path    string
	confirm string
	log     *slog.Logger
	hist    *configHistory // nil: no history kept (-state "")
	applied [32]byte       // digest of the running configuration's file
	running []byte         // the running configuration's file: a strict prefix of it is a file cut short
	last    [32]byte       // digest of the last content tried
}

func (c *configWatch) onChange(s cfgwatch.Snapshot) {
	cf, mf := s.Files[0], s.Files[1]
	forced := s.Trigger == "SIGHUP"
	if cf.Err != nil {
		c.b.RejectReload(c.path, s.Trigger, fmt.Errorf("config: %w", cf.Err))
		return
	}
	sum := sha256.Sum256(cf.Data)
	allow := false
	if mf.Data != nil {
		conf, err := config.ParseConfirmation(mf.Data)
		switch {
		case err != nil:
			c.log.Warn("removal confirmation ignored: not a confirmation file", "file", c.confirm, "err", err)
		case !conf.Allows(cf.Data, time.Now()):
			if bytes.Equal(sum[:], mustHex(conf.SHA256)) {
				c.log.Warn("removal confirmation ignored: expired; run reload -allow-removal again", "file", c.confirm, "expired", conf.Expires)
			} else if sum != c.applied {
				c.log.Warn("removal confirmation ignored: it confirms other content than the file now holds", "file", c.confirm, "config", c.path)
			}
		default:
			allow = true
		}
	}
	if !forced && (sum == c.applied || (sum == c.last && !allow && !c.hist.retry(cf.Data))) {
		return // nothing new to try: a confirmation removed, or the same refused content again
	}
	c.last = sum
	err := c.b.ReloadFile(c.path, cf.Data, balancer.ReloadOptions{AllowRemoval: allow, Trigger: s.Trigger, Alongside: c.also, Running: c.running})
	if err != nil {
		c.hist.refused(cf.Data, err)
		return
	}
	c.applied, c.running = sum, cf.Data
	source := s.Trigger
	if allow {
		source = "controller reload -allow-removal"
	}
	c.hist.applied(c.path, cf.Data, source, c.b.Config().Controller.ConfigHistory)
	if allow {
		// One shot: a used confirmation goes. If it cannot (a read-only directory), it still
		// confirms nothing but this content, and only until it expires.
		if err := os.Remove(c.confirm); err != nil {
			c.log.Info("used removal confirmation not removed; it expires by itself", "file", c.confirm, "err", err)
		}
	}
}

func mustHex(s string) []byte {
	b, _ := hex.DecodeString(s) // ParseConfirmation checked it
	return b
}

// watchConfig runs the watcher until ctx ends. SIGHUP forces a reload even of unchanged
// content (renewed key or certificate files).
func watchConfig(ctx context.Context, b *balancer.Balancer, also balancer.Reloadable, path, statePath string, loaded []byte, poll time.Duration, hist *configHistory, log *slog.Logger) {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs // the refusal's message names a command that works from any directory
	}
	c := &configWatch{b: b, also: also, path: path, confirm: confirmPath(path, statePath), log: log, hist: hist, applied: sha256.Sum256(loaded), running: loaded}
	c.last = c.applied
	w, err := cfgwatch.New(cfgwatch.Config{Paths: []string{path, c.confirm}, Baseline: [][]byte{loaded, nil},
		Poll: poll, OnChange: c.onChange, Logger: log})
	if err != nil {
		log.Error("configuration file not watched; reload with SIGHUP", "file", path, "err", err)
	} else {
		log.Info("watching the configuration", "file", path, "confirmations", c.confirm, "mode", w.Mode())
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	if w != nil {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-hup:
					w.Force("SIGHUP")
				}
			}
		}()
		w.Run(ctx)
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			data, err := config.ReadFile(path)
			var confirm []byte
			if d, err := regfile.Read(c.confirm, config.MaxConfirmationSize); err == nil {
				confirm = d
			}
			c.onChange(cfgwatch.Snapshot{Trigger: "SIGHUP", Files: []cfgwatch.File{{Path: path, Data: data, Err: err}, {Path: c.confirm, Data: confirm}}})
		}
	}
}

const reloadUsage = `usage: flowweight-controller reload -allow-removal [-config FILE] [-state FILE] [-valid DURATION]

Confirms, once, a reload the running controller refused because it would remove a service,
every backend of a service or more than half of all backends. It validates FILE and writes a
confirmation of exactly its current content (by SHA-256, valid for -valid) next to the state
file; the controller sees it and applies FILE. An ordinary reload needs no command: the
controller reloads when FILE changes, and on SIGHUP (systemctl reload flowweight-controller).

Flags:
`

// reloadCommand is `flowweight-controller reload`.
func reloadCommand(args []string) int {
	fs := flag.NewFlagSet("reload", flag.ContinueOnError)
	cfgPath := fs.String("config", "/etc/flowweight/controller.toml", "configuration file")
	statePath := fs.String("state", defaultState, "the controller's state file (as given to the controller)")
	allow := fs.Bool("allow-removal", false, "confirm the removals the file makes")
	valid := fs.Duration("valid", 15*time.Minute, "how long the confirmation stays valid")
	fs.Usage = func() { fmt.Fprint(fs.Output(), reloadUsage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if !*allow || fs.NArg() > 0 || *valid <= 0 {
		fs.Usage()
		return 2
	}
	data, err := config.ReadFile(*cfgPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "reload:", err)
		return 1
	}
	cfg, err := config.Parse(*cfgPath, data)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	conf := config.Confirm(data, time.Now(), *valid)
	path := confirmPath(*cfgPath, *statePath)
	// Readable by the controller's user; it holds a digest and a time, nothing secret.
	if err := state.WriteFileAtomic(path, conf.Encode(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "reload:", err)
		if errors.Is(err, os.ErrNotExist) {
			fmt.Fprintln(os.Stderr, "reload: the state directory does not exist; is -state the one the controller runs with?")
		}
		return 1
	}
	backends := 0
	for _, s := range cfg.Services {
		backends += len(s.Backends)
	}
	fmt.Printf("%s: removal confirmed for this content (sha256 %s: %d services, %d backends) until %s.\n"+
		"Wrote %s; the running controller applies the file when it sees it (send SIGHUP if it polls).\n",
		*cfgPath, conf.SHA256[:16], len(cfg.Services), backends, conf.Expires.Format(time.RFC3339), path)
	return 0
}
