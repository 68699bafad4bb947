package table

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Named is one table ready to ship: its name and its rows.
type Named struct {
	Name string
	Rows any
}

// bundleMagic starts every bundle; the Python reader checks it.
const bundleMagic = "EIDOLON1"

// Bundle encodes several tables as one byte buffer, so a run's results cross
// the Go/Python boundary in one copy. Layout (little endian):
//
//	"EIDOLON1", uint32 count, then per table:
//	uint32 name length, name bytes, uint64 stream length, Arrow IPC stream bytes.
//
// meta is attached to every table's schema, plus "table" = the table's
// name; canceled, if set, is polled as the columns are built and its error
// stops the encoding.
//
// Each stream is written straight into the bundle, whose room is grown by
// the stream's size before the write, in record batches of at most
// batchRows rows: the rows, one batch's Arrow columns and the bundle are
// what it holds at once, not also a buffer per stream, the whole table's
// record and the doubling copies of both (a long decode's timeline of
// 3.9 M rows, a 349 MB bundle, took the Go heap from 0.45 to 2.4 GB). A
// table's rows are dropped from tables once it is encoded, so that the
// collector may take them while the next is.
func Bundle(tables []Named, meta map[string]string, canceled func() error) ([]byte, error) {
	var out bytes.Buffer
	out.WriteString(bundleMagic)
	out.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(tables))))
	for i := range tables {
		m := make(map[string]string, len(meta)+1)
		for k, v := range meta {
			m[k] = v
		}
		name := tables[i].Name
		m["table"] = name
		t, err := newTable(tables[i].Rows, m)
		if err != nil {
			return nil, fmt.Errorf("table %q: %w", name, err)
		}
		out.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(name))))
		out.WriteString(name)
		at := out.Len()
		out.Write(make([]byte, 8)) // the stream's length, set below
		out.Grow(t.streamBytes())
		if err := t.writeStream(&out, canceled); err != nil {
			return nil, fmt.Errorf("table %q: %w", name, err)
		}
		binary.LittleEndian.PutUint64(out.Bytes()[at:], uint64(out.Len()-at-8))
		tables[i].Rows = nil
	}
	return out.Bytes(), nil
}
