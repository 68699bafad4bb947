package bindings

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/eidolon-sim/eidolon/core/scenario/eidola"
	"github.com/stretchr/testify/require"
)

// runAll runs a spec through the seam as Python does and returns its error
// (with its class prefix) or nil.
func runAll(t *testing.T, js string) error {
	t.Helper()
	h, err := Start(js)
	if err != nil {
		return err
	}
	for {
		done, err := Wait(h, 100)
		require.NoError(t, err)
		if done {
			break
		}
	}
	_, err = Result(h)
	return err
}

// problems returns Validate's list as "path: message" lines.
func problems(t *testing.T, js string) []string {
	t.Helper()
	v, err := Validate(js)
	require.NoError(t, err)
	var ps []struct{ Path, Message string }
	require.NoError(t, json.Unmarshal([]byte(v), &ps))
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Path + ": " + p.Message
	}
	return out
}

func TestPanicErrorIsInternal(t *testing.T) {
	err := classify(fmt.Errorf("layout 3: %w", &scenario.PanicError{Value: "boom", Stack: "goroutine 7"}))
	require.ErrorContains(t, err, "InternalError: layout 3: panic: boom\ngoroutine 7")
}

// A units slip in a cluster's bandwidth (25 for 25 GB/s) or a hop latency
// of 1e3 s used to abort the interpreter from a parallel_search worker.
func TestSearchWithAbsurdLinksIsASpecError(t *testing.T) {
	search := `{"kind":"parallel_search","model":{"preset":"gpt-22b","layers":8},"gpu":"a100-80gb-sxm",
		"cluster":{"topology":"switch","gpus":8,%s},"global_batch":8,"seq_len":1024,"tp":[1],"pp":[1]}`
	err := runAll(t, fmt.Sprintf(search, `"bandwidth_bytes_per_s":25`))
	require.ErrorContains(t, err, "SpecError")
	require.ErrorContains(t, err, "cluster.bandwidth_bytes_per_s: must be a bandwidth in bytes/s, at least 1e+06")
	err = runAll(t, fmt.Sprintf(search, `"latency_s":1e7`))
	require.ErrorContains(t, err, "cluster.latency_s: must be a duration in [0, 1e+06] s")
	// at the bounds the run completes or ends in a clean SimulationError
	err = runAll(t, fmt.Sprintf(search, `"bandwidth_bytes_per_s":1e6,"latency_s":1e3`))
	if err != nil {
		require.ErrorContains(t, err, "SimulationError")
	}
}

// An injected delay of 2^40 s used to wrap simulated time and give a
// shorter kernel than no delay at all; durations are bounded up front.
func TestEidolaTimesAreBounded(t *testing.T) {
	ps := problems(t, fmt.Sprintf(`{"kind":"eidola","script_source":"generator","generator":{"interval_s":1e-6},
		"injected_delays_s":[%g],"wake_latency_s":1e300,"poll_interval_s":1e300}`, math.Pow(2, 40)))
	require.Contains(t, ps, "injected_delays_s[0]: must be a duration in [0, 1e+06] s (simulated time ends after about 106.75 days), got 1.099511627776e+12")
	require.Contains(t, ps, "wake_latency_s: must be in [0, 0.001], got 1e+300")
	require.Contains(t, ps, "poll_interval_s: must be at most 0.001 s (a poll loop, not a timer), got 1e+300")
}

// At the bound the delay is simulated for real: the kernel ends after it.
func TestEidolaLongestDelayLengthensTheKernel(t *testing.T) {
	_, res, err := all.Run(scenario.Env{}, []byte(`{"kind":"eidola","script_source":"generator",
		"generator":{"interval_s":1e-6},"gemm":{"m":1024,"n":1024,"k":1024},"ghosts":3,
		"sync_modes":["syncmon"],"injected_delays_s":[0,1e6]}`))
	require.NoError(t, err)
	rows := res.Tables[0].Rows.([]eidola.SummaryRow)
	require.Len(t, rows, 2)
	require.Greater(t, rows[1].KernelTimeS, 1e6)
	require.Greater(t, rows[1].KernelTimeS, rows[0].KernelTimeS)
}
