package hw

import (
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every numeric field of GPU can be set from a spec, and every figure
// names one: a field added to GPU without a range fails here.
func TestFiguresCoverGPU(t *testing.T) {
	ty := reflect.TypeFor[GPU]()
	var numeric []string
	for i := 0; i < ty.NumField(); i++ {
		f := ty.Field(i)
		switch f.Type.Kind() {
		case reflect.Float64, reflect.Int, reflect.Int64:
			tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			numeric = append(numeric, tag)
		}
	}
	require.ElementsMatch(t, numeric, FigureNames())
	for _, f := range Figures() {
		require.Less(t, f.Min, f.Max, f.Name)
		require.GreaterOrEqual(t, f.Min, 0.0, f.Name)
	}
}

// The presets are parts, so each of their figures is within its range
// (a zero that means "the default" excepted: the spec must give a value).
func TestPresetFiguresInRange(t *testing.T) {
	for _, g := range GPUPresets() {
		for _, f := range Figures() {
			v, ok := g.Figure(f.Name)
			require.True(t, ok, f.Name)
			if v == 0 {
				continue
			}
			require.GreaterOrEqual(t, v, f.Min, "%s %s", g.Name, f.Name)
			require.LessOrEqual(t, v, f.Max, "%s %s", g.Name, f.Name)
		}
	}
}

func TestSetFigure(t *testing.T) {
	g, ok := GPUByName("h100-sxm")
	require.True(t, ok)
	require.True(t, g.SetFigure("hbm_bandwidth_bytes_per_s", 4.8e12))
	require.True(t, g.SetFigure("sm_count", 144.7))
	require.Equal(t, 4.8e12, g.HBMBandwidthBytesPerS)
	require.Equal(t, 144, g.SMCount)
	v, ok := g.Figure("sm_count")
	require.True(t, ok)
	require.Equal(t, 144.0, v)
	require.False(t, g.SetFigure("name", 1))
	require.False(t, g.SetFigure("no_such_figure", 1))
	_, ok = g.Figure("vendor")
	require.False(t, ok)
}
