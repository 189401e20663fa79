package config

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"flowweight/configs"
	"flowweight/internal/secretfile"
)

// SNMPv3 passphrases may be given inline (auth_passphrase, priv_passphrase) or, better, in
// files of their own (auth_passphrase_file, priv_passphrase_file) that pass the push key's
// checks (secretfile.Read: regular, not readable by others, not writable by group or others,
// small). A configuration file is usually world-readable (0644), and an inline passphrase in
// it is readable by every local user: Load warns about that (SecretWarnings).

// maxPassphraseFile bounds a passphrase file; a larger file is the wrong path.
const maxPassphraseFile = 4096

// placeholderPassphrase stands for a passphrase still in its file while Validate runs
// (Parse reads no file), so the length rule applies to inline values only there.
const placeholderPassphrase = "(in its file)"

// checkSNMPSecretKeys refuses a passphrase given both inline and as a file.
func checkSNMPSecretKeys(p *configs.Problems, key string, s *SNMPSrc) {
	if s.loaded {
		return
	}
	if s.AuthPassphraseFile != "" && s.AuthPassphrase != "" {
		p.Addf(key+".auth_passphrase", "given with %s.auth_passphrase_file: keep one of them (the file)", key)
	}
	if s.PrivPassphraseFile != "" && s.PrivPassphrase != "" {
		p.Addf(key+".priv_passphrase", "given with %s.priv_passphrase_file: keep one of them (the file)", key)
	}
}

// readSNMPSecrets reads every passphrase file into its passphrase. Run after Validate.
func (c *Config) readSNMPSecrets() error {
	var errs []error
	done := map[*SNMPSrc]bool{} // a [[host]]'s table may be shared by its services
	for i := range c.Services {
		s := &c.Services[i]
		for j := range s.Backends {
			b := &s.Backends[j]
			if b.SNMP == nil || done[b.SNMP] {
				continue
			}
			done[b.SNMP] = true
			key := fmt.Sprintf("service %q.backend %q.snmp", s.Name, b.Name)
			for _, f := range []struct {
				name string
				path string
				dst  *string
			}{
				{"auth_passphrase_file", b.SNMP.AuthPassphraseFile, &b.SNMP.AuthPassphrase},
				{"priv_passphrase_file", b.SNMP.PrivPassphraseFile, &b.SNMP.PrivPassphrase},
			} {
				if f.path == "" {
					continue
				}
				data, err := secretfile.Read(f.path, maxPassphraseFile)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s.%s: %s: %w", key, f.name, f.path, err))
					continue
				}
				p := strings.TrimRight(string(data), "\r\n")
				if len(p) < 8 {
					errs = append(errs, fmt.Errorf("%s.%s: %s: passphrase is %d bytes, want at least 8", key, f.name, f.path, len(p)))
					continue
				}
				*f.dst = p
			}
			b.SNMP.loaded = true
		}
	}
	return errors.Join(errs...)
}

// SecretWarnings names every SNMP secret given inline in a configuration file whose mode
// lets group or others read it (perm: the file's permission bits).
func (c *Config) SecretWarnings(perm fs.FileMode) []string {
	if perm&0o044 == 0 {
		return nil
	}
	var w []string
	done := map[*SNMPSrc]bool{}
	for _, s := range c.Services {
		for _, b := range s.Backends {
			if b.SNMP == nil || done[b.SNMP] {
				continue
			}
			done[b.SNMP] = true
			var inline []string
			if b.SNMP.AuthPassphrase != "" && b.SNMP.AuthPassphraseFile == "" {
				inline = append(inline, "auth_passphrase")
			}
			if b.SNMP.PrivPassphrase != "" && b.SNMP.PrivPassphraseFile == "" {
				inline = append(inline, "priv_passphrase")
			}
			if b.SNMP.Community != "" {
				inline = append(inline, "community")
			}
			if len(inline) == 0 {
				continue
			}
			w = append(w, fmt.Sprintf("service %q.backend %q.snmp.%s: in a configuration file readable by group or others (mode %04o), so every local user can read it; "+
				"move auth_passphrase and priv_passphrase to auth_passphrase_file and priv_passphrase_file (mode 0600), or chmod go-r the configuration",
				s.Name, b.Name, strings.Join(inline, ", "), perm.Perm()))
		}
	}
	return w
}
