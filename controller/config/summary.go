package config

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"flowweight/internal/health"
)

// maxSummary bounds Summary's line: a history listing shows one line per version, and a
// rewrite of a whole file would otherwise print every key.
const maxSummary = 400

// Summary says in one line what next changes compared with prev, structurally, from the
// parsed configurations (so a reordering, a comment or a key written out at its default is no
// change): services added and removed, then per service its backends added and removed and
// each changed key, then hosts, then every other key by its full name. For example
//
//	services: +api; web: capacity be2 1→2, +be4; collector.stale_after 3s→5s
//
// Secrets (SNMP communities and passphrases, a health URL's password) show as changed,
// never their values. "no change" when nothing differs.
func Summary(prev, next *Config) string {
	var parts []string
	parts = append(parts, named("services", serviceNames(prev), serviceNames(next))...)
	for i := range next.Services {
		ns := &next.Services[i]
		ps := findService(prev, ns.Name)
		if ps == nil {
			continue
		}
		var ch []string
		diffFields("", reflect.ValueOf(*ps), reflect.ValueOf(*ns), &ch)
		ch = append(ch, diffBackends(ps.Backends, ns.Backends)...)
		if len(ch) > 0 {
			parts = append(parts, ns.Name+": "+strings.Join(ch, ", "))
		}
	}
	parts = append(parts, named("hosts", backendNames(prev.Hosts), backendNames(next.Hosts))...)
	for i := range next.Hosts {
		nh := &next.Hosts[i]
		for j := range prev.Hosts {
			if ph := &prev.Hosts[j]; ph.Name == nh.Name {
				var ch []string
				diffFields("", reflect.ValueOf(*ph), reflect.ValueOf(*nh), &ch)
				if len(ch) > 0 {
					parts = append(parts, "host "+nh.Name+": "+strings.Join(ch, ", "))
				}
			}
		}
	}
	var rest []string
	diffFields("", reflect.ValueOf(*prev), reflect.ValueOf(*next), &rest)
	parts = append(parts, rest...)
	if len(parts) == 0 {
		return "no change"
	}
	return bound(strings.Join(parts, "; "))
}

// bound cuts s to maxSummary bytes at a separator, saying how much was left out.
func bound(s string) string {
	if len(s) <= maxSummary {
		return s
	}
	cut := strings.LastIndex(s[:maxSummary], ", ")
	if i := strings.LastIndex(s[:maxSummary], "; "); i > cut {
		cut = i
	}
	if cut <= 0 {
		cut = maxSummary
	}
	return s[:cut] + fmt.Sprintf(" … (%d more bytes of changes)", len(s)-cut)
}

// named is "what: +added -removed", or nothing when the sets are equal.
func named(what string, prev, next []string) []string {
	var ch []string
	for _, n := range next {
		if !slices.Contains(prev, n) {
			ch = append(ch, "+"+n)
		}
	}
	for _, n := range prev {
		if !slices.Contains(next, n) {
			ch = append(ch, "-"+n)
		}
	}
	if len(ch) == 0 {
		return nil
	}
	return []string{what + ": " + strings.Join(ch, " ")}
}

func serviceNames(c *Config) []string {
	out := make([]string, len(c.Services))
	for i, s := range c.Services {
		out[i] = s.Name
	}
	return out
}

func backendNames(bs []Backend) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.Name
	}
	return out
}

func findService(c *Config, name string) *Service {
	for i := range c.Services {
		if c.Services[i].Name == name {
			return &c.Services[i]
		}
	}
	return nil
}

// diffBackends is a service's backends added and removed (+be4, -be2) and each changed key
// of the others, as "KEY BACKEND OLD→NEW" (capacity be2 1→2).
func diffBackends(prev, next []Backend) []string {
	var ch []string
	for _, nb := range next {
		i := slices.IndexFunc(prev, func(b Backend) bool { return b.Name == nb.Name })
		if i < 0 {
			ch = append(ch, "+"+nb.Name)
			continue
		}
		var fs []string
		diffFields("", reflect.ValueOf(prev[i]), reflect.ValueOf(nb), &fs)
		for _, f := range fs {
			key, rest, _ := strings.Cut(f, " ")
			ch = append(ch, key+" "+nb.Name+" "+rest)
		}
	}
	for _, pb := range prev {
		if !slices.ContainsFunc(next, func(b Backend) bool { return b.Name == pb.Name }) {
			ch = append(ch, "-"+pb.Name)
		}
	}
	return ch
}

// skipped are the keys Summary reports its own way (services, hosts, backends by name).
var skipped = map[string]bool{"service": true, "host": true, "backend": true}

// named types are matched by their name, which is then no change of theirs.
var namedTypes = map[reflect.Type]bool{reflect.TypeFor[Service](): true, reflect.TypeFor[Backend](): true}

// secret keys show as changed without their values.
var secret = map[string]bool{"community": true, "auth_passphrase": true, "priv_passphrase": true}

var durationType = reflect.TypeFor[time.Duration]()

// diffFields appends "KEY OLD→NEW" for every TOML key of a and b (values of one struct type)
// that differs, KEY prefixed by prefix and dotted through sub-tables.
func diffFields(prefix string, a, b reflect.Value, out *[]string) {
	t := a.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if !f.IsExported() || tag == "" || tag == "-" || skipped[tag] || (tag == "name" && namedTypes[t]) {
			continue
		}
		key := tag
		if prefix != "" {
			key = prefix + "." + tag
		}
		fa, fb := a.Field(i), b.Field(i)
		switch {
		case f.Type.Kind() == reflect.Struct && f.Type != durationType:
			diffFields(key, fa, fb, out)
		case f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct:
			switch {
			case fa.IsNil() && fb.IsNil():
			case fa.IsNil():
				*out = append(*out, "+["+key+"]")
			case fb.IsNil():
				*out = append(*out, "-["+key+"]")
			default:
				diffFields(key, fa.Elem(), fb.Elem(), out)
			}
		case !reflect.DeepEqual(fa.Interface(), fb.Interface()):
			if secret[tag] {
				*out = append(*out, key+" changed")
				continue
			}
			*out = append(*out, key+" "+show(tag, fa)+"→"+show(tag, fb))
		}
	}
}

// show renders a value as it would be written in the file, briefly.
func show(tag string, v reflect.Value) string {
	if v.Type() == durationType {
		return time.Duration(v.Int()).String()
	}
	switch v.Kind() {
	case reflect.String:
		s := v.String()
		if tag == "health_url" || tag == "url" {
			s = health.RedactURL(s)
		}
		if s == "" || strings.ContainsAny(s, " ,;→") {
			return strconv.Quote(s)
		}
		return s
	case reflect.Float32, reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return fmt.Sprintf("%x", v.Bytes())
		}
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = show("", v.Index(i))
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	return fmt.Sprint(v.Interface())
}
