package eidola

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/eidola"
	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/spec"
)

// flatCost prices every CTA alike, so expected values stay closed-form.
type flatCost struct{}

func (flatCost) GEMMTile(m, n, k, tm, tn int, d hw.DType) eidola.Cost {
	return eidola.Cost{ComputeS: 2e-6, ReadBytes: 1e5, HBMBytes: 1e4}
}
func (flatCost) Reduce(elems, copies int, d hw.DType) eidola.Cost {
	return eidola.Cost{ComputeS: 0.5e-6, ReadBytes: 1e4}
}
func (flatCost) Copy(elems int, d hw.DType) eidola.Cost { return eidola.Cost{ComputeS: 0.2e-6} }

func flat(hw.GPU) eidola.CostModel { return flatCost{} }

func decode(t *testing.T, doc string) *spec.Eidola {
	var s spec.Eidola
	require.NoError(t, spec.Decode([]byte(doc), &s))
	s.Defaults()
	var p spec.Problems
	s.Validate(&p)
	require.NoError(t, p.Err())
	return &s
}

func tables(t *testing.T, r scenario.Result) map[string]any {
	out := map[string]any{}
	for _, tb := range r.Tables {
		out[tb.Name] = tb.Rows
	}
	return out
}

func TestRunTablesAndModes(t *testing.T) {
	s := decode(t, `{"kind":"eidola","ghosts":15,"gemm":{"m":2048,"n":1024,"k":4096},"tile":{"m":128,"n":128},
		"script_source":"generator","generator":{"start_s":1e-6},"injected_delays_s":[0,10e-6,40e-6]}`)
	res, err := Run(scenario.Env{}, s, flat)
	require.NoError(t, err)
	tb := tables(t, res)
	sum := tb["summary"].([]SummaryRow)
	require.Len(t, sum, 3*3)
	byMode := map[string][]SummaryRow{}
	for _, r := range sum {
		byMode[r.Mode] = append(byMode[r.Mode], r)
	}
	for mode, rows := range byMode {
		for i := 1; i < len(rows); i++ {
			assert.Greater(t, rows[i].KernelTimeS, rows[i-1].KernelTimeS, "%s: kernel time grows with delay", mode)
		}
	}
	// Spin-wait reads grow with the delay, SyncMon's do not.
	sw, sm := byMode["spin_wait"], byMode["syncmon"]
	assert.Greater(t, sw[2].PollingReads, 10*sw[0].PollingReads)
	assert.Equal(t, sm[0].PollingReads, sm[2].PollingReads)
	assert.Less(t, sm[2].PollingReads, sw[2].PollingReads/10)
	assert.Len(t, tb["ctas"].([]CTARow), 9*16*8)
	assert.Len(t, tb["script"].([]ScriptRow), 3*15)
}

// The script table of one run, passed back as a table source with no
// perturbation, replays the same run.
func TestScriptRoundTrip(t *testing.T) {
	s := decode(t, `{"kind":"eidola","seed":7,"ghosts":7,"kernel":"allreduce","gemm":{"m":256,"n":1024},
		"tile":{"m":32,"n":256},"script_source":"generator","generator":{"start_s":1e-6,"interval_s":0.5e-6},
		"injected_delays_s":[3e-6],"jitter_s":1e-6,"skew_s":2e-6,"straggler_probability":0.3,"straggler_delay_s":5e-6}`)
	res, err := Run(scenario.Env{}, s, flat)
	require.NoError(t, err)
	tb := tables(t, res)
	var rows []map[string]any
	for _, r := range tb["script"].([]ScriptRow) {
		rows = append(rows, map[string]any{"time_s": r.TimeS, "source_gpu": r.SourceGPU, "chunk": r.Chunk, "bytes": r.Bytes})
	}
	doc, err := json.Marshal(map[string]any{"kind": "eidola", "ghosts": 7, "kernel": "allreduce",
		"gemm": map[string]int{"m": 256, "n": 1024}, "tile": map[string]int{"m": 32, "n": 256},
		"script_source": "table", "script": rows})
	require.NoError(t, err)
	res2, err := Run(scenario.Env{}, decode(t, string(doc)), flat)
	require.NoError(t, err)
	a, b := tb["summary"].([]SummaryRow), tables(t, res2)["summary"].([]SummaryRow)
	require.Len(t, b, len(a))
	for i := range a {
		assert.Equal(t, a[i].KernelTimeS, b[i].KernelTimeS)
		assert.Equal(t, a[i].PollingReads, b[i].PollingReads)
	}
	c1, c2 := tb["ctas"].([]CTARow), tables(t, res2)["ctas"].([]CTARow)
	require.Len(t, c2, len(c1))
	for i := range c1 {
		c1[i].InjectedDelayS = 0 // the table source carries the delay in its times
		assert.Equal(t, c1[i], c2[i])
	}
}

func TestSetupRunReplaysWithinOnePercent(t *testing.T) {
	for _, kernel := range []string{"allgather_gemm", "gemm_reducescatter", "allreduce"} {
		s := decode(t, `{"kind":"eidola","ghosts":15,"kernel":"`+kernel+`","gemm":{"m":4096,"n":1024,"k":4096},
			"tile":{"m":128,"n":256},"sync_modes":["syncmon","spin_wait"]}`)
		res, err := Run(scenario.Env{}, s, flat)
		require.NoError(t, err)
		tb := tables(t, res)
		setup := tb["setup"].([]SetupRow)
		require.Len(t, setup, 1)
		sum := tb["summary"].([]SummaryRow)
		assert.Equal(t, "syncmon", sum[0].Mode)
		assert.InEpsilon(t, setup[0].DetailedKernelTimeS, sum[0].KernelTimeS, 0.01, kernel)
	}
}

func TestSpecProblems(t *testing.T) {
	var s spec.Eidola
	require.NoError(t, spec.Decode([]byte(`{"kind":"eidola","ghosts":7,"gemm":{"m":1020,"n":512,"k":64},
		"sync_modes":["spin_wiat"],"script_source":"table","poll_interval_s":-1}`), &s))
	s.Defaults()
	var p spec.Problems
	s.Validate(&p)
	err := p.Err()
	require.Error(t, err)
	for _, want := range []string{"gemm.m: must be a multiple of the GPU count", `sync_modes[0]`, `did you mean "spin_wait"`,
		"script: required", "poll_interval_s: must be > 0"} {
		assert.Contains(t, err.Error(), want)
	}
}

// The registered kind with core/compute's costs: the default spec (an
// 8-GPU all-gather + GEMM, 8192×4096×4096 bf16 on H100, script from a
// set-up run on NVLink 4 through one switch).
func TestDefaultSpecWithComputeCosts(t *testing.T) {
	s := decode(t, `{"kind":"eidola","injected_delays_s":[0,20e-6]}`)
	res, err := Kind().Run(scenario.Env{}, s)
	require.NoError(t, err)
	tb := tables(t, res)
	sum := tb["summary"].([]SummaryRow)
	require.Len(t, sum, 6)
	// never faster than the GEMM's FLOPs at the dense peak:
	// 2·8192·4096·4096 / 989.4e12 = 278 µs
	for _, r := range sum {
		assert.Greater(t, r.KernelTimeS, 2*8192*4096*4096/989.4e12)
		assert.Less(t, r.KernelTimeS, 2*2*8192*4096*4096/989.4e12, "within 2x of the roofline")
	}
	// no delay: modes within the wake latency
	assert.InDelta(t, sum[0].KernelTimeS, sum[2].KernelTimeS, 250e-9+1e-12)
	assert.InDelta(t, sum[0].KernelTimeS, sum[1].KernelTimeS, 32*100e-9)
	// the set-up run's GPU 0 is reproduced by the replay (first mode)
	setup := tb["setup"].([]SetupRow)
	assert.Equal(t, setup[0].DetailedKernelTimeS, sum[0].KernelTimeS)
	assert.EqualValues(t, 8*7, setup[0].Flows)
}

func TestUnsupportedDTypeIsASpecError(t *testing.T) {
	var s spec.Eidola
	require.NoError(t, spec.Decode([]byte(`{"kind":"eidola","gpu":"a100-80gb-sxm","dtype":"fp8"}`), &s))
	s.Defaults()
	var p spec.Problems
	s.Validate(&p)
	require.Error(t, p.Err())
	assert.Contains(t, p.Err().Error(), "dtype: a100-80gb-sxm has no fp8 tensor math")
}

// The set-up run accepts any cluster: two DGX H100 nodes (NVSwitch inside,
// InfiniBand rails between) and a ring; the replay reproduces it.
func TestSetupRunOnClusters(t *testing.T) {
	for _, cluster := range []string{`{"preset":"dgx-h100","nodes":2}`, `{"topology":"ring","link":"nvlink4"}`} {
		s := decode(t, `{"kind":"eidola","ghosts":15,"kernel":"gemm_reducescatter","gemm":{"m":4096,"n":1024,"k":4096},
			"tile":{"m":128,"n":256},"sync_modes":["spin_wait"],"cluster":`+cluster+`}`)
		res, err := Run(scenario.Env{}, s, flat)
		require.NoError(t, err, cluster)
		tb := tables(t, res)
		assert.Equal(t, tb["setup"].([]SetupRow)[0].DetailedKernelTimeS, tb["summary"].([]SummaryRow)[0].KernelTimeS, cluster)
	}
	s := decode(t, `{"kind":"eidola","ghosts":15,"gemm":{"m":4096,"n":1024,"k":4096},"cluster":{"preset":"dgx-h100"}}`)
	_, err := Run(scenario.Env{}, s, flat)
	var se *spec.Error
	require.ErrorAs(t, err, &se)
	assert.Contains(t, err.Error(), "cluster: has 8 GPUs, the group needs ghosts+1 = 16")
}

// A set-up run whose flags arrive near the simulated horizon's end (a
// link latency of 999,999 s) schedules each arrival at or after the
// instant it is delivered: there a float64 of picoseconds is 128 ps coarse,
// and the cycle's time rounded a few picoseconds before now (grown-spec
// test, seed 1378: a panic).
func TestSetupRunNearTheHorizon(t *testing.T) {
	s := decode(t, `{"kind":"eidola","ghosts":3,"gemm":{"m":256,"n":1000,"k":512},"tile":{"m":128,"n":8},"cluster":{"latency_s":999999}}`)
	res, err := Run(scenario.Env{}, s, flat)
	require.NoError(t, err)
	for _, r := range tables(t, res)["summary"].([]SummaryRow) {
		assert.Greater(t, r.KernelTimeS, 999999.0)
	}
}

// Replaying a set-up run's script gives its GPU 0 cycle for cycle, with
// core/compute's costs, in every mode and kernel: reduce CTAs poll while
// the last GEMM wave computes, and each flag that becomes visible gives the
// tiles the bandwidth its polls took, in the replay as in the full run
// (the replay was 6 cycles slow on the first case below).
func TestReplayReproducesTheSetupRun(t *testing.T) {
	for _, gpu := range []string{"b200", "a100-80gb-sxm"} {
		for _, kernel := range spec.EidolaKernels() {
			for _, mode := range spec.EidolaSyncModes() {
				s := decode(t, fmt.Sprintf(`{"kind":"eidola","gpu":%q,"ghosts":7,"kernel":%q,"gemm":{"m":2048,"n":4096,"k":4096},
					"tile":{"m":64,"n":128},"sync_modes":[%q]}`, gpu, kernel, mode))
				res, err := Kind().Run(scenario.Env{}, s)
				require.NoError(t, err)
				tb := tables(t, res)
				require.Equal(t, tb["setup"].([]SetupRow)[0].DetailedKernelTimeS, tb["summary"].([]SummaryRow)[0].KernelTimeS, "%s %s %s", gpu, kernel, mode)
			}
		}
	}
}
