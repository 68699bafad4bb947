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
	"io"
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
	t, err := newTable(rows, meta)
	if err != nil {
		return nil, err
	}
	return t.record(0, t.rows.Len(), nil)
}

// batchRows is the most rows one record batch of a stream holds: a
// timeline of millions of rows is written in batches, so that only one
// batch's columns are held beside the rows and the stream.
const batchRows = 1 << 20

// rowTable is a slice of row structs with its columns and schema.
type rowTable struct {
	rows   reflect.Value
	cols   []column
	schema *arrow.Schema
}

func newTable(rows any, meta map[string]string) (rowTable, error) {
	rv := reflect.ValueOf(rows)
	if rv.Kind() != reflect.Slice {
		return rowTable{}, fmt.Errorf("table: rows must be a slice, got %T", rows)
	}
	cols, err := columns(rv.Type().Elem())
	if err != nil {
		return rowTable{}, err
	}
	return rowTable{rows: rv, cols: cols, schema: schemaOf(cols, meta)}, nil
}

// record builds the record of rows [lo, hi), polling canceled (if set)
// before each column: a column of a million rows takes a few hundredths
// of a second.
func (t rowTable) record(lo, hi int, canceled func() error) (arrow.Record, error) {
	b := array.NewRecordBuilder(memory.DefaultAllocator, t.schema)
	defer b.Release()
	for ci, c := range t.cols {
		if canceled != nil {
			if err := canceled(); err != nil {
				return nil, err
			}
		}
		fb := b.Field(ci)
		fb.Reserve(hi - lo)
		if sb, ok := fb.(*array.StringBuilder); ok {
			// The characters' room at once, not by doubling.
			sb.ReserveData(t.stringBytes(c, lo, hi))
		}
		for i := lo; i < hi; i++ {
			v, ok := t.cell(i, c)
			if !ok {
				fb.AppendNull()
				continue
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

// cell is row i's value of column c; false for a null.
func (t rowTable) cell(i int, c column) (reflect.Value, bool) {
	v := t.rows.Index(i).FieldByIndex(c.index)
	if c.ptr {
		if v.IsNil() {
			return v, false
		}
		v = v.Elem()
	}
	return v, true
}

// stringBytes is the length of column c's strings over rows [lo, hi).
func (t rowTable) stringBytes(c column, lo, hi int) int {
	n := 0
	for i := lo; i < hi; i++ {
		if v, ok := t.cell(i, c); ok {
			n += v.Len()
		}
	}
	return n
}

// streamBytes bounds the table's IPC stream from above: each column's
// values (8 bytes a number, a bit a boolean, 4 bytes of offset a string
// and its characters) and validity bits, each buffer of each batch padded
// to 64 bytes, and room for the schema and the batches' metadata.
func (t rowTable) streamBytes() int {
	n := t.rows.Len()
	batches := max(1, (n+batchRows-1)/batchRows)
	total := 4096 + batches*1024
	for _, c := range t.cols {
		switch c.typ.ID() {
		case arrow.BOOL:
			total += n/8 + 1
		case arrow.STRING:
			total += 4*(n+batches) + t.stringBytes(c, 0, n)
		default:
			total += 8 * n
		}
		if c.ptr {
			total += n/8 + 1
		}
		total += batches * 3 * 64
	}
	return total
}

// writeStream writes the table to w as an Arrow IPC stream (schema,
// batches of at most batchRows rows, end marker), each batch released
// once written.
func (t rowTable) writeStream(w io.Writer, canceled func() error) error {
	iw := ipc.NewWriter(w, ipc.WithSchema(t.schema))
	n := t.rows.Len()
	for lo := 0; lo == 0 || lo < n; lo += batchRows {
		rec, err := t.record(lo, min(n, lo+batchRows), canceled)
		if err != nil {
			return err
		}
		err = iw.Write(rec)
		rec.Release()
		if err != nil {
			return err
		}
	}
	return iw.Close()
}

// IPC writes rows as an Arrow IPC stream (schema, its batches, end
// marker), polling canceled (if set) as it builds the columns.
func IPC(rows any, meta map[string]string, canceled func() error) ([]byte, error) {
	t, err := newTable(rows, meta)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Grow(t.streamBytes())
	if err := t.writeStream(&buf, canceled); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
