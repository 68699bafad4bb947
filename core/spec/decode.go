package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/eidolon-sim/eidolon/core/problem"
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
	if !checkValue(&p, "", tree, rv.Type().Elem()) {
		return p.Err()
	}
	// Decode what is well typed (checkValue dropped the rest, so that
	// validation can still report the range errors beside the type errors:
	// the caller gets everything at once) and written as encoding/json
	// takes it (integers written as floats, 1000.0 or 1e3, as integers).
	clean, err := json.Marshal(tree)
	if err != nil {
		return p.Err()
	}
	data = clean
	if err := json.Unmarshal(data, into); err != nil {
		var se *Error
		if errors.As(err, &se) { // a nested Unmarshaler (Model) with its paths
			p.Merge("", se)
		} else {
			p.Addf("", "%v", err)
		}
	}
	return p.Err()
}

// decodeNameOrObject decodes the two forms of a spec value that names a
// preset: a JSON string into name, or an object strictly into fields, whose
// type problems (paths relative to the value) it returns for the caller's
// Validate to report under the value's own path, the rest decoded.
func decodeNameOrObject(data []byte, name *string, fields any) (object bool, problems []Problem, err error) {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '"' {
		return false, nil, json.Unmarshal(data, name)
	}
	err = Decode(data, fields)
	var se *Error
	if errors.As(err, &se) {
		return true, se.Problems, nil
	}
	return true, nil, err
}

// Overlaps reports whether two field paths are the same field or one
// contains the other ("model" and "model.layers"; "links[2]" and
// "links[2].health"). Callers use it to drop validation problems that only
// repeat a type error at the same place.
func Overlaps(a, b string) bool {
	if a == "" || b == "" {
		return a == b
	}
	inside := func(x, y string) bool { // x is y or under it
		return x == y || (strings.HasPrefix(x, y) && (x[len(y)] == '.' || x[len(y)] == '['))
	}
	return inside(a, b) || inside(b, a)
}

// Kind reads the top-level "kind" field, which selects the scenario:
// decoded alone where it can be (a spec holding a million-request trace
// need not be built as a tree twice), else from the tree, whose errors
// name what is wrong.
func Kind(data []byte) (string, error) {
	if k, ok := topLevelKind(data); ok {
		return k, nil
	}
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

// topLevelKind reads the top-level object's "kind" as a non-empty string
// (the last one, as a decoded map keeps it), stepping over the other
// values without building them; false wherever the tree must judge.
func topLevelKind(data []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", false
	}
	var kind any
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", false
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return "", false
		}
		if t == "kind" {
			if json.Unmarshal(raw, &kind) != nil {
				return "", false
			}
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return "", false
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", false // trailing data: parseTree says so
	}
	k, ok := kind.(string)
	return k, ok && k != ""
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

// numberForm is an object type of the spec that may also be written as a
// bare number, which stands for one of its objects (Lengths: a fixed
// length), so that the short form reads as the other kinds' plain numbers.
type numberForm interface {
	objectOf(n json.Number) map[string]any
}

var numberFormType = reflect.TypeFor[numberForm]()

// expandNumber writes a bare number given for a numberForm type as the
// object it stands for; any other value is returned as it is.
func expandNumber(v any, t reflect.Type) any {
	n, ok := v.(json.Number)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if !ok || !reflect.PointerTo(t).Implements(numberFormType) {
		return v
	}
	return reflect.New(t).Interface().(numberForm).objectOf(n)
}

// checkValue reports every type problem in v against t and returns whether
// v may be decoded. Inside objects and lists it drops what fails (an
// unknown field, a wrongly typed value), so the rest can still be decoded.
func checkValue(p *Problems, path string, v any, t reflect.Type) bool {
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return true // the type checks itself during json.Unmarshal
	}
	if v == nil {
		return true // null leaves the zero value; Validate decides if that is allowed
	}
	switch t.Kind() {
	case reflect.Pointer:
		return checkValue(p, path, v, t.Elem())
	case reflect.Interface:
		// any JSON value is accepted
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			p.Addf(path, "must be an object, got %s", jsonKind(v))
			return false
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
				unknownField(p, Field(path, k), k, names)
				delete(obj, k)
				continue
			}
			obj[k] = expandNumber(obj[k], f.typ)
			if !checkValue(p, Field(path, k), obj[k], f.typ) {
				delete(obj, k)
				continue
			}
			obj[k] = integral(obj[k], f.typ)
		}
		for _, n := range names {
			if _, ok := obj[n]; !ok && fields[n].required {
				p.Addf(Field(path, n), "required")
			}
		}
	case reflect.Slice, reflect.Array:
		arr, ok := v.([]any)
		if !ok {
			p.Addf(path, "must be a list, got %s", jsonKind(v))
			return false
		}
		if t.Kind() == reflect.Array && len(arr) != t.Len() {
			p.Addf(path, "must have exactly %d elements, got %d", t.Len(), len(arr))
			return false
		}
		// A scalar element is checked first without its path, which only a
		// problem needs: formatting a million of them (a serving trace)
		// took most of a second.
		scalar := scalarKind(t.Elem())
		var quiet Problems
		for i, e := range arr {
			if !scalar || !checkValue(&quiet, "", e, t.Elem()) {
				if !checkValue(p, Index(path, i), e, t.Elem()) {
					arr[i] = nil // the element's zero value
					continue
				}
			}
			arr[i] = integral(e, t.Elem())
		}
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			p.Addf(path, "must be an object, got %s", jsonKind(v))
			return false
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !checkValue(p, Field(path, k), obj[k], t.Elem()) {
				delete(obj, k)
				continue
			}
			obj[k] = integral(obj[k], t.Elem())
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			p.Addf(path, "must be a string, got %s", jsonKind(v))
			return false
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			p.Addf(path, "must be true or false, got %s", jsonKind(v))
			return false
		}
	case reflect.Float32, reflect.Float64:
		if _, ok := v.(json.Number); !ok {
			p.Addf(path, "must be a number, got %s", jsonKind(v))
			return false
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return checkInteger(p, path, v, float64(minInt(t)), float64(maxInt(t))+1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return checkInteger(p, path, v, 0, math.Ldexp(1, t.Bits()))
	}
	return true
}

// scalarKind reports whether checkValue checks a value of t without
// descending into it (so without building a path below its own).
func scalarKind(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Float32, reflect.Float64,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return !reflect.PointerTo(t).Implements(unmarshalerType)
	}
	return false
}

func checkInteger(p *Problems, path string, v any, lo, hi float64) bool {
	n, ok := v.(json.Number)
	if !ok {
		p.Addf(path, "must be an integer, got %s", jsonKind(v))
		return false
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) {
		p.Addf(path, "must be an integer, got %s", n.String())
		return false
	}
	if f < lo || f >= hi {
		p.AddAllowed(path, fmt.Sprintf("an integer in [%.0f, %.0f)", lo, hi), "must be an integer in [%.0f, %.0f), got %s", lo, hi, n.String())
		return false
	}
	return true
}

// unknownField reports a field named k that is not one of names, with the
// closest name as a suggestion and the names allowed.
func unknownField(p *Problems, path, k string, names []string) {
	p.AddAllowed(path, "a field of "+problem.Quoted(names), "unknown field%s; allowed here: %s", problem.DidYouMean(k, names), strings.Join(names, ", "))
}

// integral writes an integer field's number given as a float (1000.0,
// 1e3: what pandas and numpy hand over) as the integer literal encoding/json
// requires; checkValue has checked that it is whole and in range.
func integral(v any, t reflect.Type) any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	n, ok := v.(json.Number)
	if !ok {
		return v
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
	default:
		return v
	}
	if _, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
		return v
	}
	if _, err := strconv.ParseUint(n.String(), 10, 64); err == nil {
		return v
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) {
		return v
	}
	return json.Number(strconv.FormatFloat(f, 'f', -1, 64))
}

func minInt(t reflect.Type) int64 { return -1 << (t.Bits() - 1) }
func maxInt(t reflect.Type) int64 { return 1<<(t.Bits()-1) - 1 }

// field is one JSON field of a struct: its type, and whether the spec must
// give it (tag spec:"required"), and where it is in its struct
// (reflect.Value.FieldByIndex).
type field struct {
	typ      reflect.Type
	required bool
	index    []int
}

// structFields maps JSON names to fields, flattening embedded structs the
// way encoding/json does.
func structFields(t reflect.Type) map[string]field {
	out := map[string]field{}
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
					ft.index = append([]int{i}, ft.index...)
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
		out[name] = field{typ: f.Type, required: f.Tag.Get("spec") == "required", index: []int{i}}
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
