package config

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
)

// decodeFile decodes the config file b onto c, which holds the defaults. It is stricter than
// encoding/json, whose mistakes here would go unnoticed: the file is exactly one JSON object
// (anything but white space after it, a stray "}" say, is an error); every key is a key of
// its object spelt exactly, case included ("StateDir" is not "stateDir"), and given once;
// null, for any setting, leaves it as it is (the default), as a key left out does; a list or
// map given replaces the default. Errors name the key path of the value at fault, e.g.
// egressHandlers["h1"].headerTimeout or denyRanges[2], or the line and column of a syntax
// error.
func decodeFile(b []byte, c *Config) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		if errors.Is(err, io.EOF) {
			return errors.New("the file holds no JSON object")
		}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line, col := position(b, int(se.Offset))
			return fmt.Errorf("line %d, column %d: %w", line, col, err)
		}
		return err
	}
	end := int(dec.InputOffset())
	if rest := bytes.TrimLeft(b[end:], " \t\r\n"); len(rest) > 0 {
		line, col := position(b, len(b)-len(rest)+1)
		return fmt.Errorf("line %d, column %d: %q after the top-level object", line, col, clipBytes(rest, 20))
	}
	if t := firstByte(raw); t != '{' && t != 'n' {
		return errors.New("the file must hold one JSON object")
	}
	return decodeValue("", raw, reflect.ValueOf(c).Elem())
}

// decodeValue decodes raw onto v (addressable), path naming it in errors.
func decodeValue(path string, raw json.RawMessage, v reflect.Value) error {
	if firstByte(raw) == 'n' { // null: not set
		return nil
	}
	if u, ok := v.Addr().Interface().(json.Unmarshaler); ok {
		if err := u.UnmarshalJSON(raw); err != nil {
			return fmt.Errorf("%s: %w", pathOrTop(path), err)
		}
		return nil
	}
	if _, ok := v.Addr().Interface().(encoding.TextUnmarshaler); ok {
		return decodeScalar(path, raw, v) // a string, as encoding/json reads it
	}
	switch v.Kind() {
	case reflect.Struct:
		members, err := objectMembers(path, raw)
		if err != nil {
			return err
		}
		fields := jsonFields(v.Type())
		for _, m := range members {
			i, ok := fields[m.key]
			if !ok {
				return unknownKey(path, m.key, fields)
			}
			if err := decodeValue(joinKey(path, m.key), m.value, v.Field(i)); err != nil {
				return err
			}
		}
		return nil
	case reflect.Map:
		members, err := objectMembers(path, raw)
		if err != nil {
			return err
		}
		if v.IsNil() {
			v.Set(reflect.MakeMap(v.Type()))
		}
		for _, m := range members {
			elem := reflect.New(v.Type().Elem()).Elem()
			if err := decodeValue(path+"["+strconv.Quote(m.key)+"]", m.value, elem); err != nil {
				return err
			}
			v.SetMapIndex(reflect.ValueOf(m.key).Convert(v.Type().Key()), elem)
		}
		return nil
	case reflect.Slice:
		if firstByte(raw) != '[' {
			return fmt.Errorf("%s: want a list, got %s", pathOrTop(path), jsonKind(raw))
		}
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return fmt.Errorf("%s: %w", pathOrTop(path), err)
		}
		out := reflect.MakeSlice(v.Type(), len(items), len(items))
		for i, item := range items {
			if err := decodeValue(fmt.Sprintf("%s[%d]", path, i), item, out.Index(i)); err != nil {
				return err
			}
		}
		v.Set(out)
		return nil
	}
	return decodeScalar(path, raw, v)
}

// decodeScalar decodes raw onto v with encoding/json, path naming it in errors.
func decodeScalar(path string, raw json.RawMessage, v reflect.Value) error {
	if err := json.Unmarshal(raw, v.Addr().Interface()); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			want := kindName(v.Kind())
			if _, text := v.Addr().Interface().(encoding.TextUnmarshaler); text {
				want = "a string"
			}
			return fmt.Errorf("%s: want %s, got %s", pathOrTop(path), want, jsonKind(raw))
		}
		return fmt.Errorf("%s: %w", pathOrTop(path), err)
	}
	return nil
}

// member is one key and value of a JSON object, in the order written.
type member struct {
	key   string
	value json.RawMessage
}

// objectMembers splits raw, which must be a JSON object, into its members; a key given twice
// is an error (encoding/json would keep the last silently).
func objectMembers(path string, raw json.RawMessage) ([]member, error) {
	if firstByte(raw) != '{' {
		return nil, fmt.Errorf("%s: want an object, got %s", pathOrTop(path), jsonKind(raw))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // the '{'
		return nil, err
	}
	var out []member
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pathOrTop(path), err)
		}
		key, _ := t.(string) // an object's member starts with its key
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, fmt.Errorf("%s: %w", joinKey(path, key), err)
		}
		if seen[key] {
			return nil, fmt.Errorf("%s: key given twice", joinKey(path, key))
		}
		seen[key] = true
		out = append(out, member{key, value})
	}
	return out, nil
}

// jsonFields maps the JSON keys of struct type t (its fields' json tags) to field indexes.
func jsonFields(t reflect.Type) map[string]int {
	out := map[string]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = i
	}
	return out
}

// unknownKey is the error of key, not a key of the object at path, naming the key it
// miscases if any.
func unknownKey(path, key string, fields map[string]int) error {
	for name := range fields {
		if strings.EqualFold(name, key) {
			return fmt.Errorf("%s: unknown key; keys are case-sensitive: did you mean %q?", joinKey(path, key), name)
		}
	}
	return fmt.Errorf("%s: unknown key", joinKey(path, key))
}

func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func pathOrTop(path string) string {
	if path == "" {
		return "the file"
	}
	return path
}

// firstByte is the first byte of raw that is not white space (0 if none).
func firstByte(raw []byte) byte {
	if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) > 0 {
		return t[0]
	}
	return 0
}

// position is the 1-based line and column of the byte at 1-based offset off of b.
func position(b []byte, off int) (line, col int) {
	off = min(max(off, 1), len(b)+1)
	before := b[:off-1]
	line = 1 + bytes.Count(before, []byte("\n"))
	col = off - bytes.LastIndexByte(before, '\n') - 1
	return line, col
}

// jsonKind names the kind of JSON value raw holds, for a type error that must not echo the
// value: a setting may be a credential (s3SecretKey, a handler's signingSecret).
func jsonKind(raw json.RawMessage) string {
	switch firstByte(raw) {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

// clipBytes is b, cut to n bytes with a marker, for an error message.
func clipBytes(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// kindName says what JSON value a field of kind k takes.
func kindName(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a " + k.String()
}
