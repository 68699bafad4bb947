package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
)

// Decode parses JSON into the struct pointed to by into, strictly: unknown
// fields (with a suggestion), wrong types and out-of-range integers are all
// reported at once as an *Error with field paths. Nothing is defaulted or
// validated here; see the Defaults and Validate methods of each spec.
func Decode(data []byte, into any) error {
	rv := reflect.ValueOf(into)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("spec.Decode: need a non-nil pointer, got %T", into)
	}
	tree, err := parseTree(data)
	if err != nil {
		return err
	}
	var p Problems
	checkValue(&p, "", tree, rv.Type().Elem())
	if err := p.Err(); err != nil {
		return err
	}
	if err := json.Unmarshal(data, into); err != nil {
		p.Addf("", "%v", err)
		return p.Err()
	}
	return nil
}

// Kind reads the top-level "kind" field, which selects the scenario.
func Kind(data []byte) (string, error) {
	tree, err := parseTree(data)
	if err != nil {
		return "", err
	}
	obj, ok := tree.(map[string]any)
	if !ok {
		return "", &Error{Problems: []Problem{{Message: "spec must be a JSON object, got " + jsonKind(tree)}}}
	}
	k, ok := obj["kind"].(string)
	if !ok || k == "" {
		return "", &Error{Problems: []Problem{{Path: "kind", Message: "required: a scenario kind string"}}}
	}
	return k, nil
}

func parseTree(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, &Error{Problems: []Problem{{Message: "not valid JSON: " + err.Error()}}}
	}
	if dec.More() {
		return nil, &Error{Problems: []Problem{{Message: "not valid JSON: trailing data after the top-level value"}}}
	}
	return tree, nil
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

func checkValue(p *Problems, path string, v any, t reflect.Type) {
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return // the type checks itself during json.Unmarshal
	}
	if v == nil {
		return // null leaves the zero value; Validate decides if that is allowed
	}
	switch t.Kind() {
	case reflect.Pointer:
		checkValue(p, path, v, t.Elem())
	case reflect.Interface:
		// any JSON value is accepted
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			p.Addf(path, "must be an object, got %s", jsonKind(v))
			return
		}
		fields := structFields(t)
		names := make([]string, 0, len(fields))
		for n := range fields {
			names = append(names, n)
		}
		sort.Strings(names)
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			f, ok := fields[k]
			if !ok {
				msg := "unknown field"
				if s := Suggest(k, names); s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", s)
				}
				p.Addf(Field(path, k), "%s; allowed here: %s", msg, strings.Join(names, ", "))
				continue
			}
			checkValue(p, Field(path, k), obj[k], f)
		}
	case reflect.Slice, reflect.Array:
		arr, ok := v.([]any)
		if !ok {
			p.Addf(path, "must be a list, got %s", jsonKind(v))
			return
		}
		if t.Kind() == reflect.Array && len(arr) != t.Len() {
			p.Addf(path, "must have exactly %d elements, got %d", t.Len(), len(arr))
		}
		for i, e := range arr {
			checkValue(p, Index(path, i), e, t.Elem())
		}
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			p.Addf(path, "must be an object, got %s", jsonKind(v))
			return
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			checkValue(p, Field(path, k), obj[k], t.Elem())
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			p.Addf(path, "must be a string, got %s", jsonKind(v))
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			p.Addf(path, "must be true or false, got %s", jsonKind(v))
		}
	case reflect.Float32, reflect.Float64:
		if _, ok := v.(json.Number); !ok {
			p.Addf(path, "must be a number, got %s", jsonKind(v))
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		checkInteger(p, path, v, float64(minInt(t)), float64(maxInt(t))+1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		checkInteger(p, path, v, 0, math.Ldexp(1, t.Bits()))
	}
}

func checkInteger(p *Problems, path string, v any, lo, hi float64) {
	n, ok := v.(json.Number)
	if !ok {
		p.Addf(path, "must be an integer, got %s", jsonKind(v))
		return
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) {
		p.Addf(path, "must be an integer, got %s", n.String())
		return
	}
	if f < lo || f >= hi {
		p.Addf(path, "must be an integer in [%.0f, %.0f), got %s", lo, hi, n.String())
	}
}

func minInt(t reflect.Type) int64 { return -1 << (t.Bits() - 1) }
func maxInt(t reflect.Type) int64 { return 1<<(t.Bits()-1) - 1 }

// structFields maps JSON names to field types, flattening embedded structs
// the way encoding/json does.
func structFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				for n, ft := range structFields(et) {
					out[n] = ft
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
