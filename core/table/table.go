// Package table is the only package that knows Arrow. It turns result rows
// (slices of structs whose fields carry `arrow:"column_name"` tags) into
// Arrow records and writes them as one IPC stream per table.
//
// Supported field types: float64, float32, int, int64, int32, uint64, uint32,
// bool, string, and pointers to these (null when nil). The fields of an
// embedded struct become columns where it is embedded, so tables that share
// columns share one struct.
package table

import (
	"bytes"
	"fmt"
	"reflect"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/ipc"
	"github.com/apache/arrow/go/v17/arrow/memory"
)

type column struct {
	name  string
	index []int
	typ   arrow.DataType
	ptr   bool
}

func schemaOf(cols []column, meta map[string]string) *arrow.Schema {
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = arrow.Field{Name: c.name, Type: c.typ, Nullable: c.ptr}
	}
	var md *arrow.Metadata
	if len(meta) > 0 {
		m := arrow.MetadataFrom(meta)
		md = &m
	}
	return arrow.NewSchema(fields, md)
}

func columns(t reflect.Type) ([]column, error) {
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("table: rows must be structs, got %s", t)
	}
	var cols []column
	seen := map[string]bool{}
	for _, f := range reflect.VisibleFields(t) {
		name := f.Tag.Get("arrow")
		if name == "" || name == "-" {
			continue
		}
		ft, ptr := f.Type, false
		if ft.Kind() == reflect.Pointer {
			ft, ptr = ft.Elem(), true
		}
		var at arrow.DataType
		switch ft.Kind() {
		case reflect.Float64, reflect.Float32:
			at = arrow.PrimitiveTypes.Float64
		case reflect.Int, reflect.Int64, reflect.Int32:
			at = arrow.PrimitiveTypes.Int64
		case reflect.Uint64, reflect.Uint32:
			at = arrow.PrimitiveTypes.Uint64
		case reflect.Bool:
			at = arrow.FixedWidthTypes.Boolean
		case reflect.String:
			at = arrow.BinaryTypes.String
		default:
			return nil, fmt.Errorf("table: %s.%s has unsupported type %s", t.Name(), f.Name, f.Type)
		}
		if seen[name] {
			return nil, fmt.Errorf("table: %s has column %q twice", t.Name(), name)
		}
		seen[name] = true
		cols = append(cols, column{name: name, index: f.Index, typ: at, ptr: ptr})
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("table: %s has no arrow-tagged fields", t.Name())
	}
	return cols, nil
}

// Record builds an Arrow record from a slice of structs. The caller releases it.
func Record(rows any, meta map[string]string) (arrow.Record, error) {
	return record(rows, meta, nil)
}

// record is Record, polling canceled (if set) before each column: a
// timeline's column of millions of rows takes a tenth of a second.
func record(rows any, meta map[string]string, canceled func() error) (arrow.Record, error) {
	rv := reflect.ValueOf(rows)
	if rv.Kind() != reflect.Slice {
		return nil, fmt.Errorf("table: rows must be a slice, got %T", rows)
	}
	cols, err := columns(rv.Type().Elem())
	if err != nil {
		return nil, err
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schemaOf(cols, meta))
	defer b.Release()
	n := rv.Len()
	for ci, c := range cols {
		if canceled != nil {
			if err := canceled(); err != nil {
				return nil, err
			}
		}
		fb := b.Field(ci)
		fb.Reserve(n)
		for i := 0; i < n; i++ {
			v := rv.Index(i).FieldByIndex(c.index)
			if c.ptr {
				if v.IsNil() {
					fb.AppendNull()
					continue
				}
				v = v.Elem()
			}
			switch bb := fb.(type) {
			case *array.Float64Builder:
				bb.Append(v.Float())
			case *array.Int64Builder:
				bb.Append(v.Int())
			case *array.Uint64Builder:
				bb.Append(v.Uint())
			case *array.BooleanBuilder:
				bb.Append(v.Bool())
			case *array.StringBuilder:
				bb.Append(v.String())
			}
		}
	}
	return b.NewRecord(), nil
}

// IPC writes rows as an Arrow IPC stream (schema, one batch, end marker),
// polling canceled (if set) as it builds the columns.
func IPC(rows any, meta map[string]string, canceled func() error) ([]byte, error) {
	rec, err := record(rows, meta, canceled)
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(rec.Schema()))
	if err := w.Write(rec); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
