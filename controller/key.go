package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"flowweight/controller/balancer"
	"flowweight/controller/config"
	"flowweight/internal/report"
)

// keyCommand prints the push key of one probe backend, derived from collector.secret_file and
// the backend's name (docs/push-protocol.md, "Key derivation"), as the contents of the probe's
// key file; with -out it writes that file, mode 0600, instead. So each probe gets a key that
// speaks for its own backend only, and the operator never copies the controller's secret.
func keyCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("key", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "/etc/flowweight/controller.toml", "configuration file")
	out := fs.String("out", "", "write the key file here (mode 0600, replaced atomically) instead of printing it")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: controller key [-config FILE] [-out KEYFILE] BACKEND\n\nPrints (or writes) the push key file of a probe backend.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	rest := fs.Args()
	if len(rest) > 0 { // flags may follow the backend name too
		if err := fs.Parse(rest[1:]); err != nil {
			return 2
		}
		rest = append(rest[:1], fs.Args()...)
	}
	if len(rest) != 1 {
		fs.Usage()
		return 2
	}
	name := rest[0]
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	be, err := probeBackend(cfg, *cfgPath, name)
	if err != nil {
		fmt.Fprintln(stderr, "key:", err)
		return 1
	}
	k, err := balancer.ProbeKey(cfg, be, report.LoadKey)
	if err != nil {
		fmt.Fprintf(stderr, "key: backend %q: %v\n", name, err)
		return 1
	}
	line := append(k, '\n')
	if *out == "" {
		if _, err := stdout.Write(line); err != nil {
			fmt.Fprintln(stderr, "key:", err)
			return 1
		}
		return 0
	}
	if err := writeKeyFile(*out, line); err != nil {
		fmt.Fprintln(stderr, "key:", err)
		return 1
	}
	fmt.Fprintf(stderr, "wrote the push key of backend %q to %s (mode 0600); install it on that backend as its probe's key_file\n", name, *out)
	return 0
}

// probeBackend finds the backend whose key `controller key` can derive, or says why not.
func probeBackend(cfg *config.Config, path, name string) (*config.Backend, error) {
	var names []string
	for i := range cfg.Services {
		for j := range cfg.Services[i].Backends {
			be := &cfg.Services[i].Backends[j]
			names = append(names, be.Name)
			if be.Name != name {
				continue
			}
			switch {
			case be.Source != "probe":
				return nil, fmt.Errorf("backend %q has source %q: the collector polls it, it has no probe and no push key", name, be.Source)
			case be.KeyFile != "":
				return nil, fmt.Errorf("backend %q has its own key_file %s in %s: install that file on its probe (or remove the line to use a derived key)", name, be.KeyFile, path)
			case cfg.Collector.EffectiveKeyMode() == config.KeyModeShared:
				return nil, fmt.Errorf("key_mode is \"shared\" in %s: every probe uses collector.key_file (%s) itself; set collector.secret_file instead for a key per backend", path, cfg.Collector.KeyFile)
			}
			return be, nil
		}
	}
	return nil, fmt.Errorf("backend %q is not in %s (its backends: %s)", name, path, strings.Join(names, ", "))
}

// writeKeyFile writes data to path through a temporary file in the same directory, created
// 0600, so no other user ever sees the key and a reader never sees half a file.
func writeKeyFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("key file %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing left to remove
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("key file %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("key file %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("key file %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("key file %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("key file %s: %w", path, err)
	}
	return nil
}

// checkKeys loads every probe backend's push key as the controller will at start, so
// -check-config catches a missing, short or world-readable secret or key file.
func checkKeys(cfg *config.Config) error {
	var errs []error
	seen := map[string]error{}
	load := func(path string) ([]byte, error) {
		if err, ok := seen[path]; ok && err != nil {
			return nil, err
		}
		k, err := report.LoadKey(path)
		seen[path] = err
		return k, err
	}
	reported := map[string]bool{}
	for i := range cfg.Services {
		for j := range cfg.Services[i].Backends {
			be := &cfg.Services[i].Backends[j]
			if be.Source != "probe" {
				continue
			}
			if _, err := balancer.ProbeKey(cfg, be, load); err != nil && !reported[err.Error()] {
				reported[err.Error()] = true // one line per bad file, not per backend
				errs = append(errs, fmt.Errorf("backend %q: %w", be.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}
