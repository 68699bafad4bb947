package fidelity

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/hw"
)

// TestMAMFRowsMatchPresets holds the rows that say a preset's main loop is
// taken from them to the preset (core/hw/presets.go states the same
// figures): the measured rate over the part's peak is its TensorEfficiency.
func TestMAMFRowsMatchPresets(t *testing.T) {
	taken := 0
	for _, r := range MAMFRows {
		g, ok := hw.GPUByName(r.GPU)
		require.True(t, ok, r.GPU)
		if !strings.Contains(r.Basis, "at this row's efficiency") {
			continue
		}
		taken++
		require.InDelta(t, r.TFLOPS*1e12/g.Peak(r.DType), g.TensorEfficiency, 1e-9, "%s %s", r.GPU, r.DType)
	}
	require.Equal(t, 2, taken, "the B200 and MI300X rows")
}
