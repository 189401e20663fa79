// Package configs holds the example configuration files and the strict TOML decoding that
// every flowweight component uses for its own configuration.
//
// The examples live here, next to the decoder, so that a test loads every one of them and
// they never rot. Component packages (controller/config, probe/config) own their structs
// and validation; this package only owns "how a TOML file becomes a struct, strictly".
package configs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/BurntSushi/toml"
)

var typeErrRE = regexp.MustCompile(`^toml: line (\d+) \(last key ("[^"]*")\): (.*)$`)

// DecodeFile reads path and decodes it strictly into v; see Decode.
func DecodeFile(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return Decode(path, data, v)
}

// Decode decodes TOML data into v and refuses anything it does not understand.
//
// An unknown key is an error, not a warning: a misspelt tuning knob that silently keeps its
// default is the worst kind of configuration bug for a load balancer, because the system keeps
// running with weights the operator did not ask for. Every error names the file, the key and,
// where it can be found, the line.
func Decode(name string, data []byte, v any) error {
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(v)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			if pe.LastKey != "" {
				return fmt.Errorf("%s:%d: key %q: %s", name, pe.Position.Line, pe.LastKey, pe.Message)
			}
			return fmt.Errorf("%s:%d: %s", name, pe.Position.Line, pe.Message)
		}
		// Type mismatches come as plain errors in the library's "line N (last key K)" form.
		if m := typeErrRE.FindStringSubmatch(err.Error()); m != nil {
			return fmt.Errorf("%s:%s: key %s: %s", name, m[1], m[2], m[3])
		}
		return fmt.Errorf("%s: %s", name, strings.TrimPrefix(err.Error(), "toml: "))
	}
	var errs []error
	for _, k := range md.Undecoded() {
		key := k.String()
		if line := findKeyLine(data, k); line > 0 {
			errs = append(errs, fmt.Errorf("%s:%d: unknown key %q", name, line, key))
		} else {
			errs = append(errs, fmt.Errorf("%s: unknown key %q", name, key))
		}
	}
	return errors.Join(errs...)
}

// findKeyLine finds the line on which key is assigned, or opened as a table, by following the
// table headers. The TOML library does not expose positions of undecoded keys; this is good
// enough to point an operator at the right line, and returns 0 when unsure.
func findKeyLine(data []byte, k toml.Key) int {
	if len(k) == 0 {
		return 0
	}
	parent, last := strings.Join(k[:len(k)-1], "."), k[len(k)-1]
	table := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for line := 1; sc.Scan(); line++ {
		t := strings.TrimSpace(sc.Text())
		if t == "" || t[0] == '#' {
			continue
		}
		if strings.HasPrefix(t, "[") {
			if i := strings.LastIndexByte(t, ']'); i > 0 {
				t = t[:i]
			}
			table = strings.TrimSpace(strings.Trim(t, "[]"))
			if table == k.String() {
				return line
			}
			continue
		}
		if eq := strings.IndexByte(t, '='); eq > 0 && table == parent {
			if strings.Trim(strings.TrimSpace(t[:eq]), `"'`) == last {
				return line
			}
		}
	}
	return 0
}

// Problems collects validation errors so that an operator sees every mistake in one run,
// each prefixed with the key it is about.
type Problems struct{ errs []error }

// Addf records a problem with key.
func (p *Problems) Addf(key, format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
}

// Add records err, if not nil, as a problem with key.
func (p *Problems) Add(key string, err error) {
	if err != nil {
		p.errs = append(p.errs, fmt.Errorf("%s: %w", key, err))
	}
}

// Err joins every problem, or returns nil when there were none.
func (p *Problems) Err() error { return errors.Join(p.errs...) }
