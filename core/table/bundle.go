package table

import (
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
func Bundle(tables []Named, meta map[string]string, canceled func() error) ([]byte, error) {
	out := []byte(bundleMagic)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(tables)))
	for _, t := range tables {
		m := make(map[string]string, len(meta)+1)
		for k, v := range meta {
			m[k] = v
		}
		m["table"] = t.Name
		stream, err := IPC(t.Rows, m, canceled)
		if err != nil {
			return nil, fmt.Errorf("table %q: %w", t.Name, err)
		}
		out = binary.LittleEndian.AppendUint32(out, uint32(len(t.Name)))
		out = append(out, t.Name...)
		out = binary.LittleEndian.AppendUint64(out, uint64(len(stream)))
		out = append(out, stream...)
	}
	return out, nil
}
