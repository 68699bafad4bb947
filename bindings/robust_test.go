package bindings

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"testing"
	"time"

	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/eidolon-sim/eidolon/core/scenario/eidola"
	"github.com/stretchr/testify/require"
)

// runAll runs a spec through the seam as Python does and returns its error
// (with its class prefix) or nil.
func runAll(t *testing.T, js string) error {
	t.Helper()
	h, err := Start(js, 0)
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
	v, err := Validate(js, 0)
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

const train = `{"kind":"training","model":{"preset":"gpt-22b","layers":4},"gpu":"a100-80gb-sxm",
	"cluster":{"preset":"dgx-a100","nodes":1},"parallel":{"tp":%d,"pp":1,"micro_batch":1,"global_batch":8}%s}`

// Numbers that used to be accepted and give wrong results.
func TestWrongNumbersAreSpecErrors(t *testing.T) {
	ps := problems(t, fmt.Sprintf(`{"kind":"operators","model":"gpt-22b","gpu":"h100-sxm","batch":%d}`, int64(1)<<40))
	require.Equal(t, []string{"batch: must be in [1, 1048576], got 1099511627776"}, ps)
	ps = problems(t, `{"kind":"operators","model":"gpt-22b","gpu":"h100-sxm","batch":4096,"seq_len":16777216}`)
	require.Len(t, ps, 1)
	require.Contains(t, ps[0], "exceeds 2^62")
	// a link fault without health would fail the link silently
	ps = problems(t, fmt.Sprintf(train, 1, `,"faults":{"links":[{"src":"n0.gpu5","dst":"n0.nic5"}]}`))
	require.Equal(t, []string{"faults.links[0].health: required"}, ps)
	// a timeline rank that does not exist
	js := fmt.Sprintf(train, 1, `,"timeline_ranks":[3,99]`)
	require.Equal(t, []string{"timeline_ranks[1]: must be a rank in [0, 8) (or [-1] alone for none), got 99"}, problems(t, js))
	require.ErrorContains(t, runAll(t, js), "SpecError: invalid spec: timeline_ranks[1]")
	// model.layers has a bound, checked before a preset is applied
	for _, layers := range []int64{-1, 1 << 40} {
		js := fmt.Sprintf(`{"kind":"operators","model":{"preset":"gpt-22b","layers":%d},"gpu":"h100-sxm"}`, layers)
		require.Equal(t, []string{fmt.Sprintf("model.layers: must be in [1, 16384], got %d", layers)}, problems(t, js))
		require.ErrorContains(t, runAll(t, js), "SpecError")
	}
}

// Validation reports everything at once, with full paths.
func TestProblemsAllAtOnce(t *testing.T) {
	require.Equal(t, []string{"seed: must be an integer, got a string", "iterations: must be in [1, 1e15], got -1"},
		problems(t, `{"kind":"selftest","seed":"x","iterations":-1}`))
	require.Equal(t, []string{
		"model.layers: must be an integer, got a string",
		"seq_len: must be in [1, 16777216], got -1",
	}, problems(t, `{"kind":"training","model":{"preset":"gpt-22b","layers":"x"},"gpu":"a100-80gb-sxm",
		"cluster":{"preset":"dgx-a100"},"seq_len":-1}`))
	ps := problems(t, `{"kind":"selftest","iteratons":5,"iterations":-3}`)
	require.Len(t, ps, 2)
	require.Contains(t, ps[0], `iteratons: unknown field (did you mean "iterations"?)`)
	require.Equal(t, "iterations: must be in [1, 1e15], got -3", ps[1])
	require.Equal(t, []string{": spec must be a JSON object, got a list"}, problems(t, `[{"kind":"selftest"}]`))
	require.Len(t, problems(t, `{"kind":`), 1)
}

// validate() reports what run() would reject: checks that need the built
// cluster (its GPU count, device names, ranks).
func TestValidateMakesTheRunsChecks(t *testing.T) {
	js := fmt.Sprintf(train, 16, "")
	ps := problems(t, js)
	require.NotEmpty(t, ps)
	require.Contains(t, ps[0], "parallel")
	err := runAll(t, js)
	require.ErrorContains(t, err, "SpecError")
	require.ErrorContains(t, err, ps[0])

	js = fmt.Sprintf(train, 1, `,"faults":{"links":[{"src":"n0.gpu77","dst":"n0.gpu5","health":0.5}]}`)
	ps = problems(t, js)
	require.Len(t, ps, 1)
	require.Contains(t, ps[0], "gpu77")
	require.ErrorContains(t, runAll(t, js), ps[0])

	js = `{"kind":"collective","cluster":{"topology":"ring","gpus":4},"collective":"all_reduce","sizes_bytes":[1e6],"group":[0,9]}`
	require.Equal(t, []string{"group[1]: rank must be < 4 (the cluster's rank count), got 9"}, problems(t, js))
	js = `{"kind":"inference","model":"llama2-7b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},"tp":8,"pp":2}`
	ps = problems(t, js)
	require.Len(t, ps, 1)
	require.Contains(t, ps[0], "replicas: tp·pp·replicas")
}

// Set-up work outside events polls the run's context: a canceled run
// returns at once instead of after its set-up (90 s for a 2,048-GPU
// eidola set-up run, minutes for a collective over 131,072 GPUs).
func TestSetUpWorkIsCancellable(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, js := range []string{
		`{"kind":"eidola","ghosts":2047,"gemm":{"m":16384,"n":4096,"k":4096}}`,
		`{"kind":"collective","cluster":{"preset":"dgx-h100","nodes":1024},"collective":"all_reduce","sizes_bytes":[1e9]}`,
	} {
		_, _, err := all.Run(scenario.Env{Ctx: ctx}, []byte(js))
		require.ErrorIs(t, err, context.Canceled, js)
	}
}

// Runs that would exhaust memory (fatal in Go) are refused up front, with
// the fields and the estimate; the limit is the caller's or the spec's.
func TestMemoryBudget(t *testing.T) {
	gib := float64(1 << 30)
	for _, c := range []struct{ js, path string }{
		{`{"kind":"seedflood","topology":{"kind":"ring","clients":16},"model":{"kind":"mlp","hidden":[1000000]}}`, "model.hidden"},
		// the data set, not the model, is what grows here: its field first
		{`{"kind":"seedflood","topology":{"kind":"ring","clients":4},"dataset":{"samples":10000000,"n_features":1048576}}`, "dataset.samples"},
		// a decode in segments keeps only its timeline rows (6.7 GB here); one
		// built whole (a fault after time 0) its plan (2.7 GB)
		{`{"kind":"inference","model":"llama2-7b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},"output_tokens":262144}`, "output_tokens"},
		{`{"kind":"inference","model":"llama2-7b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},"pp":2,"output_tokens":16384,"faults":{"links":[{"src":"n0.gpu1","dst":"n0.nvswitch","health":0.5,"at_s":1}]}}`, "output_tokens"},
		{`{"kind":"eidola","ghosts":4095,"gemm":{"m":16384,"n":4096,"k":4096}}`, "ghosts"},
		{`{"kind":"training","model":{"preset":"gpt-22b","layers":2},"gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},"parallel":{"tp":8,"global_batch":2000000}}`, "parallel.global_batch"},
		{`{"kind":"ssm_tp","model":"mamba-2.8b","gpu":"a100-80gb-sxm","cluster":{"topology":"switch","gpus":4,"link":"nvlink3"},"tp_degrees":[1,2],"batch":2,"prompt_lengths":[256],"output_length":64000}`, "output_length"},
		{`{"kind":"parallel_search","model":{"preset":"gpt-22b","layers":2},"gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":4},"global_batch":524288000,"seq_len":512,"tp":[2,4],"pp":[1],"micro_batch":[1],"keep":2}`, "global_batch"},
		{`{"kind":"fault_sweep","link_failures":1,"training":{"model":{"preset":"gpt-22b","layers":2},"gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},"parallel":{"tp":8,"global_batch":2000000}}}`, "training.parallel.global_batch"},
		// the cluster itself: 524,288 GPUs hold about 5 GB of topology,
		// links and routes in a step, 10 in a fault sweep
		{`{"kind":"training","model":{"preset":"gpt-22b","layers":2},"gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":65536},"parallel":{"tp":8,"global_batch":131072}}`, "cluster"},
		{`{"kind":"fault_sweep","samples":2,"link_failures":1,"training":{"model":{"preset":"gpt-22b","layers":2},"gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":65536},"parallel":{"tp":8,"global_batch":131072}}}`, "training.cluster"},
		{`{"kind":"inference","model":"llama2-7b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":65536},"output_tokens":4}`, "cluster"},
		{`{"kind":"parallel_search","model":{"preset":"gpt-22b","layers":2},"gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":65536},"global_batch":131072,"seq_len":256,"tp":[8],"pp":[1,2],"micro_batch":[1]}`, "cluster"},
	} {
		h, err := Start(c.js, 2*gib)
		require.Error(t, err, c.js)
		require.Zero(t, h)
		require.ErrorContains(t, err, "SpecError: invalid spec: "+c.path+": the run would need about")
		require.ErrorContains(t, err, "over the memory limit of 2 GiB")
	}
	// the spec's own limit wins over the caller's
	js := `{"kind":"inference","model":"llama2-7b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},"output_tokens":64,"max_memory_bytes":1000}`
	_, err := Start(js, 0)
	require.ErrorContains(t, err, "over the memory limit of 9.31e-07 GiB")
	v, err := Validate(`{"kind":"selftest","max_memory_bytes":-1}`, 0)
	require.NoError(t, err)
	require.Contains(t, v, "max_memory_bytes")
	// A limit above the machine's memory, the spec's or the caller's, would
	// admit runs that exhaust it: refused by Start and Validate alike.
	over := 4 * DefaultMaxMemoryBytes()
	_, err = Start(fmt.Sprintf(`{"kind":"selftest","max_memory_bytes":%g}`, over), 0)
	require.ErrorContains(t, err, "SpecError: invalid spec: max_memory_bytes: must not exceed this machine's memory")
	_, err = Start(`{"kind":"selftest"}`, over)
	require.ErrorContains(t, err, "max_memory_bytes: must not exceed this machine's memory")
	v, err = Validate(`{"kind":"selftest"}`, over)
	require.NoError(t, err)
	require.Contains(t, v, "must not exceed this machine's memory")
	require.Greater(t, DefaultMaxMemoryBytes(), 0.0)
	// A run started sets the runtime's soft limit to 90 % of the memory
	// the default limit is half of (unless GOMEMLIMIT says otherwise).
	if os.Getenv("GOMEMLIMIT") == "" {
		soft, machine := float64(debug.SetMemoryLimit(-1)), 2*DefaultMaxMemoryBytes()
		require.Greater(t, soft, 0.5*machine)
		require.Less(t, soft, machine)
	}
}

func TestCanonicalFillsDefaults(t *testing.T) {
	a, err := Canonical(`{"kind":"selftest"}`)
	require.NoError(t, err)
	b, err := Canonical(a)
	require.NoError(t, err)
	require.Equal(t, a, b)
	_, err = Canonical(`{"kind":"selftest","iterations":-1}`)
	require.ErrorContains(t, err, "SpecError")
}

// Found by the corpus: a prefill too large to count wrapped simulated time
// inside the executor (now a HorizonError in the kernel, and refused up
// front by the pass-size bound).
func TestHugePassIsRefused(t *testing.T) {
	ps := problems(t, `{"kind":"inference","model":{"preset":"llama2-7b","layers":8},"gpu":"a100-80gb-sxm",
		"cluster":{"preset":"dgx-a100","nodes":1},"tp":2,"batch":2000,"prompt_tokens":8388608,"output_tokens":8}`)
	require.Len(t, ps, 1)
	require.Contains(t, ps[0], "batch: batch·tokens·context·width = ")
}

// Found by the corpus: an unknown field beside an out-of-range one in a
// model used to reach model defaults with layers = -2^63 (a panic).
func TestBadModelBesideAnUnknownFieldIsASpecError(t *testing.T) {
	js := `{"kind":"inference","model":{"preset":"llama2-7b","layers":-9223372036854775808,"layer":false},
		"gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},"tp":2,"batch":2,"prompt_tokens":128,"output_tokens":8}`
	ps := problems(t, js)
	require.NotEmpty(t, ps)
	require.Contains(t, ps[0], `model.layer: unknown field (did you mean "layers"?)`)
	require.ErrorContains(t, runAll(t, js), "SpecError")
}

// Work that does not look at the cancellation does not hold the run's end
// (building a 65,536-rank ring's routes, a collection on a heap of
// gigabytes): the run ends canceled at once, and the work finishes behind
// it and is dropped. Work that ends first gives the run its outcome, a
// panic's as an InternalError.
func TestSuperviseEndsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	release, finished := make(chan struct{}), make(chan struct{})
	r := &run{cancel: cancel, done: make(chan struct{})}
	go r.supervise(ctx, func() ([]byte, error) {
		<-release
		close(finished)
		return []byte("late"), nil
	})
	cancel()
	within := func(c chan struct{}) {
		select {
		case <-c:
		case <-time.After(10 * time.Second):
			t.Fatal("not within 10 s")
		}
	}
	within(r.done)
	require.EqualError(t, r.err, "Canceled: run interrupted")
	require.Nil(t, r.result)
	close(release)
	within(finished)

	r = &run{done: make(chan struct{})}
	r.supervise(context.Background(), func() ([]byte, error) { return []byte("tables"), nil })
	require.NoError(t, r.err)
	require.Equal(t, []byte("tables"), r.result)
	r = &run{done: make(chan struct{})}
	r.supervise(context.Background(), func() ([]byte, error) { panic("mid-run") })
	require.ErrorContains(t, r.err, "InternalError: panic: mid-run")
}
