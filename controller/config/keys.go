package config

import (
	"fmt"
	"strings"

	"flowweight/configs"
)

// Push key modes (collector.key_mode).
const (
	KeyModeDerived = "derived" // each probe's key from secret_file and the backend name
	KeyModeShared  = "shared"  // key_file is every probe's key
)

// EffectiveKeyMode is key_mode, or what it defaults to: derived when secret_file is set,
// shared when only key_file is (the configuration before key_mode existed), derived otherwise.
func (c *Collector) EffectiveKeyMode() string {
	switch {
	case c.KeyMode != "":
		return c.KeyMode
	case c.SecretFile == "" && c.KeyFile != "":
		return KeyModeShared
	}
	return KeyModeDerived
}

func (c *Collector) validateKeys(p *configs.Problems, needKey []string) {
	usesProbe := len(needKey) > 0
	switch c.KeyMode {
	case "", KeyModeDerived, KeyModeShared:
	default:
		p.Addf("collector.key_mode", "%q is not one of derived, shared", c.KeyMode)
		return
	}
	switch mode := c.EffectiveKeyMode(); {
	case c.SecretFile != "" && c.KeyFile != "":
		p.Addf("collector.key_file", "set secret_file (a key derived per backend) or key_file (one key shared by every probe), not both")
	case mode == KeyModeShared && c.SecretFile != "":
		p.Addf("collector.secret_file", "given but key_mode is \"shared\": the probes' key is key_file")
	case mode == KeyModeDerived && c.KeyFile != "":
		p.Addf("collector.key_file", "a key shared by every probe, but key_mode is \"derived\": set secret_file instead, or key_mode = \"shared\"")
	case usesProbe && mode == KeyModeDerived && c.SecretFile == "":
		p.Addf("collector.secret_file", "required: probe backend(s) %s have no key_file of their own and get their key derived from it "+
			"(head -c 32 /dev/urandom > FILE; chmod 600 FILE; then `controller key -config THIS BACKEND` for each probe); "+
			"or set key_mode = \"shared\" and collector.key_file", strings.Join(needKey, ", "))
	case usesProbe && mode == KeyModeShared && c.KeyFile == "":
		p.Addf("collector.key_file", "required with key_mode \"shared\": probe backend(s) %s have no key_file of their own", strings.Join(needKey, ", "))
	}
}

// Warnings are configurations that work but weaken the push protocol's authentication; the
// controller logs them at start and -check-config prints them. Each names the key and says how
// to rewrite it. Valid only after Validate.
func (c *Config) Warnings() []string {
	var w []string
	var shared []string
	byFile := map[string][]string{}
	var files []string
	listed := map[string]bool{} // a host backs several services but has one key
	for _, s := range c.Services {
		for _, b := range s.Backends {
			if b.Source != "probe" || listed[b.Name] {
				continue
			}
			listed[b.Name] = true
			if b.KeyFile == "" || (b.KeyFile == c.Collector.KeyFile && c.Collector.EffectiveKeyMode() == KeyModeShared) {
				shared = append(shared, b.Name)
				continue
			}
			if byFile[b.KeyFile] == nil {
				files = append(files, b.KeyFile)
			}
			byFile[b.KeyFile] = append(byFile[b.KeyFile], b.Name)
		}
	}
	if c.Collector.EffectiveKeyMode() == KeyModeShared && len(shared) > 0 {
		how := "key_mode is \"shared\""
		if c.Collector.KeyMode == "" {
			how = "no secret_file, so key_mode defaults to \"shared\""
		}
		w = append(w, fmt.Sprintf("collector.key_file: %s: the %d probe backend(s) %s all use the key in %s, so whoever holds one probe's key can forge reports for every backend "+
			"(and hold back their probes). To give each probe a key of its own: create a secret (head -c 32 /dev/urandom > /etc/flowweight/push.secret; chmod 600 it), "+
			"replace key_file = %q with secret_file = \"/etc/flowweight/push.secret\" in [collector], and install on each backend's probe the output of "+
			"`controller key -config FILE BACKEND -out KEYFILE` as its key_file",
			how, len(shared), strings.Join(shared, ", "), c.Collector.KeyFile, c.Collector.KeyFile))
	}
	for _, f := range files {
		if names := byFile[f]; len(names) > 1 {
			w = append(w, fmt.Sprintf("key_file %s is the key of the backends %s: each can forge reports for the others; give each its own file, or drop their key_file to use keys derived from collector.secret_file",
				f, strings.Join(names, ", ")))
		}
	}
	return append(w, c.hostWarnings()...)
}
