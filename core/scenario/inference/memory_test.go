package inference_test

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"testing"

	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/eidolon-sim/eidolon/core/scenario/inference"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/stretchr/testify/require"
)

// peakLive runs an inference spec and returns the largest live heap seen
// (after a collection, at each progress report of the run) above the heap
// before it, and the run's tables' rows.
func peakLive(t *testing.T, js string, segment int) (peak uint64, rows int) {
	_, s, err := all.Decode([]byte(js))
	require.NoError(t, err, js)
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	env := scenario.Env{Ctx: context.Background(), Progress: func(float64) {
		runtime.GC()
		runtime.ReadMemStats(&ms)
		if ms.HeapAlloc > base {
			peak = max(peak, ms.HeapAlloc-base)
		}
	}}
	out, err := inference.SimulateSegments(env, s.(*spec.Inference), nil, segment)
	require.NoError(t, err, js)
	for _, tb := range out.Result().Tables {
		rows += reflect.ValueOf(tb.Rows).Len()
	}
	return peak, rows
}

// A decode's memory does not grow with its output length: 16,384 output
// tokens peak at no more than 1.5 times the live heap of 1,024 (the tables
// hold a row per rank and per stage; no timeline is asked for).
func TestDecodeMemoryIndependentOfOutputLength(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates 17,000 decode steps")
	}
	for _, layout := range []string{`"tp":2`, `"tp":2,"pp":2`} {
		spec := func(out int) string {
			return fmt.Sprintf(`{"kind":"inference","model":{"preset":"llama2-7b","layers":4},"gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},%s,"batch":4,"prompt_tokens":128,"output_tokens":%d,"timeline_ranks":[-1]}`, layout, out)
		}
		short, rs := peakLive(t, spec(1024), 0)
		long, rl := peakLive(t, spec(16384), 0)
		t.Logf("%s: peak live heap %d B at 1,024 output tokens, %d B at 16,384", layout, short, long)
		require.Equal(t, rs, rl, "the same tables")
		require.Positive(t, short)
		require.LessOrEqual(t, float64(long), 1.5*float64(short), layout)
	}
}
