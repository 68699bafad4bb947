package table

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"

	"github.com/apache/arrow/go/v17/arrow"
	"github.com/apache/arrow/go/v17/arrow/array"
	"github.com/apache/arrow/go/v17/arrow/ipc"
	"github.com/stretchr/testify/require"
)

type row struct {
	Name    string   `arrow:"name"`
	TimeS   float64  `arrow:"time_s"`
	Count   int      `arrow:"count"`
	Bytes   uint64   `arrow:"bytes"`
	Fits    bool     `arrow:"fits"`
	Maybe   *float64 `arrow:"maybe_s"`
	private int
	Skipped string
}

func TestRecordColumnsAndValues(t *testing.T) {
	half := 0.5
	rows := []row{{"a", 1.5, 2, 3, true, &half, 0, "x"}, {"b", 2.5, -1, 4, false, nil, 0, "y"}}
	rec, err := Record(rows, map[string]string{"seed": "7"})
	require.NoError(t, err)
	defer rec.Release()
	require.Equal(t, int64(2), rec.NumRows())
	s := rec.Schema()
	require.Equal(t, []string{"name", "time_s", "count", "bytes", "fits", "maybe_s"}, fieldNames(s))
	require.Equal(t, arrow.PrimitiveTypes.Int64, s.Field(2).Type)
	require.True(t, s.Field(5).Nullable)
	v, ok := s.Metadata().GetValue("seed")
	require.True(t, ok)
	require.Equal(t, "7", v)
	require.Equal(t, "b", rec.Column(0).(*array.String).Value(1))
	require.Equal(t, 2.5, rec.Column(1).(*array.Float64).Value(1))
	require.Equal(t, int64(-1), rec.Column(2).(*array.Int64).Value(1))
	require.Equal(t, 0.5, rec.Column(5).(*array.Float64).Value(0))
	require.True(t, rec.Column(5).IsNull(1))
}

// Columns shared by two tables live in one embedded struct; its fields
// become columns where the struct is embedded.
func TestEmbeddedStructColumns(t *testing.T) {
	type shared struct {
		Link int    `arrow:"link"`
		Src  string `arrow:"src"`
	}
	type withShared struct {
		First float64 `arrow:"first"`
		shared
		Last bool `arrow:"last"`
	}
	rec, err := Record([]withShared{{First: 1.5, shared: shared{Link: 7, Src: "n0.gpu1"}, Last: true}}, nil)
	require.NoError(t, err)
	defer rec.Release()
	var names []string
	for _, f := range rec.Schema().Fields() {
		names = append(names, f.Name)
	}
	require.Equal(t, []string{"first", "link", "src", "last"}, names)
	require.Equal(t, int64(7), rec.Column(1).(*array.Int64).Value(0))
	require.Equal(t, "n0.gpu1", rec.Column(2).(*array.String).Value(0))
}

func TestRecordRejectsUnsupported(t *testing.T) {
	type bad struct {
		X []int `arrow:"x"`
	}
	_, err := Record([]bad{{}}, nil)
	require.ErrorContains(t, err, "unsupported type")
	_, err = Record(3, nil)
	require.ErrorContains(t, err, "must be a slice")
	type none struct{ X int }
	_, err = Record([]none{}, nil)
	require.ErrorContains(t, err, "no arrow-tagged fields")
	type dup struct {
		A int `arrow:"a"`
		B int `arrow:"a"`
	}
	_, err = Record([]dup{}, nil)
	require.ErrorContains(t, err, "twice")
}

func TestEmptyTableHasSchema(t *testing.T) {
	b, err := IPC([]row{}, nil, nil)
	require.NoError(t, err)
	require.NotEmpty(t, b)
	r, err := ipc.NewReader(bytes.NewReader(b))
	require.NoError(t, err)
	require.Equal(t, 6, len(r.Schema().Fields()))
}

func TestBundleLayout(t *testing.T) {
	b, err := Bundle([]Named{{"summary", []row{{Name: "a"}}}, {"links", []row{}}}, map[string]string{"kind": "k"}, nil)
	require.NoError(t, err)
	names, streams := readBundle(t, b)
	require.Equal(t, []string{"summary", "links"}, names)
	for i, s := range streams {
		r, err := ipc.NewReader(bytes.NewReader(s))
		require.NoError(t, err)
		tbl, _ := r.Schema().Metadata().GetValue("table")
		require.Equal(t, names[i], tbl)
	}
}

// readBundle splits a bundle into its tables' names and IPC streams,
// checking its header and that the streams fill it.
func readBundle(t *testing.T, b []byte) (names []string, streams [][]byte) {
	t.Helper()
	require.Equal(t, bundleMagic, string(b[:8]))
	count := int(binary.LittleEndian.Uint32(b[8:]))
	pos := 12
	for range count {
		n := int(binary.LittleEndian.Uint32(b[pos:]))
		pos += 4
		names = append(names, string(b[pos:pos+n]))
		pos += n
		size := int(binary.LittleEndian.Uint64(b[pos:]))
		pos += 8
		streams = append(streams, b[pos:pos+size])
		pos += size
	}
	require.Equal(t, len(b), pos)
	return names, streams
}

func fieldNames(s *arrow.Schema) []string {
	var out []string
	for _, f := range s.Fields() {
		out = append(out, f.Name)
	}
	return out
}

// Encoding allocates the bundle, whose room is reserved once, and each
// record batch's columns, released as written (Arrow's builders round
// their room up to a power of two): 2.7 times the bundle here, where a
// stream buffer per table, a whole table's record and the doubling copies
// of each allocated 4.8 times (and took a long decode's 349 MB bundle
// through 2 GB of heap).
func TestBundleAllocatesLittleBesideItsSize(t *testing.T) {
	type big struct {
		Rank  int      `arrow:"rank"`
		Name  string   `arrow:"name"`
		Start float64  `arrow:"start_s"`
		End   float64  `arrow:"end_s"`
		Bytes *float64 `arrow:"bytes"`
		Busy  bool     `arrow:"busy"`
	}
	const n = 3*batchRows + 12345 // several batches and a partial one
	rows := make([]big, n)
	one := 1.0
	for i := range rows {
		rows[i] = big{Rank: i % 8, Name: fmt.Sprintf("mb%d.c%d.fwd.attn.qkv", i%97, i%7), Start: float64(i), End: float64(i + 1), Busy: i%3 == 0}
		if i%2 == 0 {
			rows[i].Bytes = &one
		}
	}
	tables := []Named{{"small", []row{{Name: "a"}}}, {"big", rows}}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b, err := Bundle(tables, map[string]string{"kind": "x"}, nil)
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	alloc := float64(after.TotalAlloc - before.TotalAlloc)
	t.Logf("bundle %.1f MB, allocated %.1f MB (%.2fx)", float64(len(b))/1e6, alloc/1e6, alloc/float64(len(b)))
	require.Less(t, alloc, 3*float64(len(b)))
	require.Nil(t, tables[1].Rows, "an encoded table's rows are let go")

	// The stream reads back as every row, in batches of at most batchRows.
	names, streams := readBundle(t, b)
	require.Equal(t, []string{"small", "big"}, names)
	rd, err := ipc.NewReader(bytes.NewReader(streams[1]))
	require.NoError(t, err)
	defer rd.Release()
	total, batches := 0, 0
	for rd.Next() {
		rec := rd.Record()
		require.LessOrEqual(t, int(rec.NumRows()), batchRows)
		name, bytesCol := rec.Column(1).(*array.String), rec.Column(4)
		for i := 0; i < int(rec.NumRows()); i++ {
			want := rows[total+i]
			if name.Value(i) != want.Name || bytesCol.IsNull(i) != (want.Bytes == nil) {
				require.Failf(t, "row differs", "row %d: %q null %v", total+i, name.Value(i), bytesCol.IsNull(i))
			}
		}
		total += int(rec.NumRows())
		batches++
	}
	require.NoError(t, rd.Err())
	require.Equal(t, n, total)
	require.Equal(t, 4, batches)
}
