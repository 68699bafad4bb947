package table

import (
	"bytes"
	"encoding/binary"
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
	require.Equal(t, bundleMagic, string(b[:8]))
	require.Equal(t, uint32(2), binary.LittleEndian.Uint32(b[8:]))
	pos := 12
	var names []string
	for i := 0; i < 2; i++ {
		n := int(binary.LittleEndian.Uint32(b[pos:]))
		pos += 4
		names = append(names, string(b[pos:pos+n]))
		pos += n
		size := int(binary.LittleEndian.Uint64(b[pos:]))
		pos += 8
		r, err := ipc.NewReader(bytes.NewReader(b[pos : pos+size]))
		require.NoError(t, err)
		tbl, _ := r.Schema().Metadata().GetValue("table")
		require.Equal(t, names[i], tbl)
		pos += size
	}
	require.Equal(t, []string{"summary", "links"}, names)
	require.Equal(t, len(b), pos)
}

func fieldNames(s *arrow.Schema) []string {
	var out []string
	for _, f := range s.Fields() {
		out = append(out, f.Name)
	}
	return out
}
