package spec

import (
	"encoding/json"
	"testing"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/stretchr/testify/require"
)

func decodeGPU(t *testing.T, js string) (GPU, []Problem) {
	t.Helper()
	var o Operators
	require.NoError(t, Decode([]byte(`{"kind":"operators","model":"llama2-7b","gpu":`+js+`}`), &o))
	var p Problems
	o.GPU.Validate(&p, "gpu")
	return o.GPU, p.List()
}

func TestGPUPresetOrWhatIf(t *testing.T) {
	g, probs := decodeGPU(t, `"h100-sxm"`)
	require.Empty(t, probs)
	part, ok := g.Resolve()
	require.True(t, ok)
	h100, _ := hw.GPUByName("h100-sxm")
	require.Equal(t, h100, part)

	// Only the figures given change; the part is labelled as a variant.
	g, probs = decodeGPU(t, `{"preset": "h100-sxm", "hbm_bandwidth_bytes_per_s": 4.8e12, "hbm_bytes": 141e9, "sm_count": 144}`)
	require.Empty(t, probs)
	part, ok = g.Resolve()
	require.True(t, ok)
	want := h100
	want.Name = "h100-sxm*"
	want.HBMBandwidthBytesPerS, want.HBMBytes, want.SMCount = 4.8e12, 141e9, 144
	want.KernelParameters = "h100-sxm's (fitted on Vidur's kernel tables (bench/fidelity/KERNELS.md)), with hbm_bandwidth_bytes_per_s, hbm_bytes, sm_count changed"
	require.Equal(t, want, part)

	g, probs = decodeGPU(t, `{"preset": "a100-80gb-sxm", "name": "a100-hbm3"}`)
	require.Empty(t, probs)
	part, _ = g.Resolve()
	require.Equal(t, "a100-hbm3", part.Name)
}

// A spec written back reads the same: a bare preset as its name, a what-if
// part as an object.
func TestGPURoundTrip(t *testing.T) {
	for _, js := range []string{`"b200"`, `{"name":"x","preset":"b200","tensor_efficiency":0.5}`} {
		g, probs := decodeGPU(t, js)
		require.Empty(t, probs)
		out, err := json.Marshal(g)
		require.NoError(t, err)
		require.JSONEq(t, js, string(out))
	}
}

func TestGPUProblemsNameTheField(t *testing.T) {
	for js, want := range map[string][]string{
		`"h100"`:                                                 {`gpu: must be one of`, `did you mean one of "h100-sxm", "h100-pcie"?`},
		`{"preset": "h100", "clock_hz": 2e9}`:                    {`gpu.preset: must be one of`},
		`{"hbm_bandwidth_bytes_per_s": 3e12}`:                    {`gpu.preset: required`},
		`{"preset": "h100-sxm", "hbm_bandwith_bytes_per_s": 1}`:  {`gpu.hbm_bandwith_bytes_per_s: unknown field (did you mean "hbm_bandwidth_bytes_per_s"?)`},
		`{"preset": "h100-sxm", "sm_count": "many"}`:             {`gpu.sm_count: must be a number, got a string`},
		`{"preset": "h100-sxm", "sm_count": 132.5}`:              {`gpu.sm_count: must be a whole number, got 132.5`},
		`{"preset": "h100-sxm", "sm_count": 0}`:                  {`gpu.sm_count: must be in [1, 1024], got 0`},
		`{"preset": "h100-sxm", "hbm_bandwidth_bytes_per_s": 3}`: {`gpu.hbm_bandwidth_bytes_per_s: must be in [1e+09, 1e+16], got 3`},
		`{"preset": "h100-sxm", "tensor_efficiency": 1.5}`:       {`gpu.tensor_efficiency: must be in [0.01, 1], got 1.5`},
		`{"preset": "h100-sxm", "clock_hz": 1e400}`:              {`gpu.clock_hz: must be a finite number`},
		`{"preset": "h100-sxm", "name": 7}`:                      {`gpu.name: must be a string, got a number`},
		`{"preset": 7}`:                                          {`gpu.preset: must be a string, got a number`},
		`[1, 2]`:                                                 {`gpu: must be a GPU preset name or an object`},
	} {
		_, probs := decodeGPU(t, js)
		require.NotEmpty(t, probs, js)
		msg := (&Error{Problems: probs}).Error()
		for _, w := range want {
			require.Contains(t, msg, w, js)
		}
	}
}

// A what-if part without the number type asked for is reported as the
// preset's would be.
func TestGPUWithoutTheDType(t *testing.T) {
	var o Operators
	require.NoError(t, Decode([]byte(`{"kind":"operators","model":"llama2-7b","dtype":"fp8","gpu":{"preset":"h100-sxm","peak_fp8_flops_per_s":0,"name":"h100-no-fp8"}}`), &o))
	o.Defaults()
	var p Problems
	o.Validate(&p)
	require.ErrorContains(t, p.Err(), "dtype: h100-no-fp8 has no fp8")
}
