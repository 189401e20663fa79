package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
)

// checkKeys is the token-level pass Decode makes before encoding/json sees the data, because
// encoding/json alone accepts what the format does not: it matches field names without
// regard to case and lets the last of repeated keys win, so `"OPERATOR_DRAIN":true` beside
// `"operator_drain":false` was applied as drained while jq read it as not drained. Here every
// object of a struct type may hold only its fields' exact names, and no object anywhere
// (maps and the replay marks included) may repeat a key. Errors name where, as a path.
func checkKeys(data []byte, t reflect.Type) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := walk(dec, t, "$"); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON object")
	}
	return nil
}

var (
	rawType         = reflect.TypeFor[json.RawMessage]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
)

// walk reads one value whose Go type is t (nil: any JSON, as in a json.RawMessage).
func walk(dec *json.Decoder, t reflect.Type, at string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawType {
		t = nil
	}
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF && at != "$" {
			err = io.ErrUnexpectedEOF // a value is missing: the file was cut short
		}
		return fmt.Errorf("%s: %w", at, err)
	}
	switch tok {
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if err := walk(dec, elem, fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
		return closing(dec, at)
	case json.Delim('{'):
	default:
		return nil // a scalar: encoding/json checks its type
	}
	var fields map[string]reflect.Type // a struct's exact names; nil for a map or any
	var elem reflect.Type
	switch {
	case t != nil && reflect.PointerTo(t).Implements(unmarshalerType):
		// Decodes itself (time.Time is a string anyway): only repeated keys are refused.
	case t != nil && t.Kind() == reflect.Struct:
		fields = jsonFields(t)
	case t != nil && t.Kind() == reflect.Map:
		elem = t.Elem()
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("%s: %w", at, err)
		}
		key, _ := tok.(string)
		if seen[key] {
			return fmt.Errorf("%s: key %s appears twice", at, quoteKey(key))
		}
		seen[key] = true
		child := elem
		if fields != nil {
			ft, ok := fields[key]
			if !ok {
				return fmt.Errorf("%s: unknown field %q (field names are exact, lower case: %s)", at, quoteKey(key), strings.Join(names(fields), ", "))
			}
			child = ft
		}
		if err := walk(dec, child, fmt.Sprintf("%s.%s", at, quoteKey(key))); err != nil {
			return err
		}
	}
	return closing(dec, at)
}

// closing reads the ']' or '}' that ends the value at at.
func closing(dec *json.Decoder, at string) error {
	if _, err := dec.Token(); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("%s: %w", at, err)
	}
	return nil
}

// jsonFields maps each exported field's JSON name to its type.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func names(m map[string]reflect.Type) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// quoteKey shows a key as a path element: bare when it is a plain name, quoted (and
// bounded) otherwise.
func quoteKey(k string) string {
	if nameRE.MatchString(k) {
		return k
	}
	if len(k) > 64 {
		return fmt.Sprintf("%q...", k[:64])
	}
	return fmt.Sprintf("%q", k)
}
