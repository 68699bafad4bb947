package inference_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/eidolon-sim/eidolon/core/scenario/inference"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/stretchr/testify/require"
)

// A decode run in segments (job.Job.RunStepped) gives exactly the tables
// of the whole plan's run, and runs in segments where its boundaries are
// quiescent: one simulated replica, no fault after time 0.
func TestSegmentsGiveTheWholeRunsTables(t *testing.T) {
	for _, c := range []struct {
		extra     string
		segmented bool
	}{
		{`"tp":2`, true},
		{`"tp":2,"execution":"cuda_graphs"`, true},
		{`"tp":1,"replicas":4,"timeline_ranks":[0,3,1]`, true},
		{`"tp":2,"replicas":2,"faults":{"stragglers":[{"device":"n0.gpu1","slowdown":1.5}]}`, false},
		{`"tp":2,"faults":{"stragglers":[{"device":"n0.gpu1","slowdown":1.5}]}`, true},
		{`"tp":4,"faults":{"links":[{"src":"n0.gpu2","dst":"n0.nvswitch","health":0.5}]}`, true},
		{`"tp":2,"replicas":2,"faults":{"links":[{"src":"n0.gpu2","dst":"n0.nvswitch","health":0.5}]}`, false},
		{`"tp":2,"faults":{"links":[{"src":"n0.gpu1","dst":"n0.nvswitch","health":0.5,"at_s":0.01}]}`, false},
		{`"tp":2,"pp":2,"timeline_ranks":[-1]`, true},
		{`"tp":2,"pp":2,"execution":"eager"`, true},
		{`"tp":1,"pp":4,"replicas":2,"execution":"cuda_graphs","timeline_ranks":[0,1,2,3,4]`, true},
		{`"tp":2,"pp":2,"requests":[{"count":2,"prompt_tokens":300,"output_tokens":30},{"count":1,"prompt_tokens":50,"output_tokens":41}]`, true},
		{`"tp":2,"pp":2,"faults":{"stragglers":[{"device":"n0.gpu3","slowdown":1.3}]}`, true},
		{`"tp":2,"pp":2,"replicas":2,"faults":{"stragglers":[{"device":"n0.gpu3","slowdown":1.3}]}`, false},
		{`"tp":2,"requests":[{"count":2,"prompt_tokens":300,"output_tokens":30},{"count":1,"prompt_tokens":50,"output_tokens":41}]`, true},
		{`"model":{"preset":"mixtral-8x7b","layers":4},"tp":2,"replicas":4,"ep":4`, true},
		{`"model":{"preset":"deepseek-v3","layers":4},"tp":1,"pp":2,"replicas":4,"ep":2,"execution":"eager"`, true},
		{`"model":{"preset":"mixtral-8x7b","layers":4},"tp":2,"replicas":4,"ep":2,"faults":{"stragglers":[{"device":"n0.gpu5","slowdown":1.2}]}`, false},
		{`"model":{"preset":"mixtral-8x7b","layers":4},"tp":2,"replicas":2`, true},
		{`"model":{"preset":"deepseek-v3","layers":4},"tp":8,"execution":"eager"`, true},
		{`"model":{"preset":"mamba-370m","layers":6},"tp":2,"faults":{"devices":[{"device":"n0.gpu7"}]}`, true},
	} {
		extra := c.extra
		if !strings.Contains(extra, `"model"`) {
			extra += `,"model":{"preset":"llama2-7b","layers":4}`
		}
		js := fmt.Sprintf(`{"kind":"inference","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},"batch":3,"prompt_tokens":100,"output_tokens":40,%s}`, extra)
		_, s, err := all.Decode([]byte(js))
		require.NoError(t, err, js)
		env := scenario.Env{Ctx: context.Background()}
		whole, err := inference.SimulateSegments(env, s.(*spec.Inference), nil, -1)
		require.NoError(t, err, js)
		require.Equal(t, 1, whole.Segments, js)
		seg, err := inference.SimulateSegments(env, s.(*spec.Inference), nil, 8)
		require.NoError(t, err, js)
		if c.segmented {
			require.Greater(t, seg.Segments, 4, js) // 40 steps or more, 8 at a time
		} else {
			require.Equal(t, 1, seg.Segments, js)
		}
		require.Equal(t, whole.Result(), seg.Result(), js)
	}
}

// A run in segments reports progress that only grows, and stops with the
// context's error when canceled in the middle of its decode.
func TestSegmentsReportProgressAndCancel(t *testing.T) {
	js := `{"kind":"inference","model":{"preset":"llama2-7b","layers":4},"gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},"tp":2,"output_tokens":2000}`
	_, s, err := all.Decode([]byte(js))
	require.NoError(t, err)
	var seen []float64
	env := scenario.Env{Ctx: context.Background(), Progress: func(f float64) { seen = append(seen, f) }}
	out, err := inference.SimulateSegments(env, s.(*spec.Inference), nil, 0)
	require.NoError(t, err)
	require.Greater(t, out.Segments, 1)
	require.Greater(t, len(seen), 3)
	require.IsNonDecreasing(t, seen)
	require.Equal(t, 1.0, seen[len(seen)-1])

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env = scenario.Env{Ctx: ctx, Progress: func(f float64) {
		if f > 0.5 {
			cancel()
		}
	}}
	_, err = inference.SimulateSegments(env, s.(*spec.Inference), nil, 0)
	require.ErrorIs(t, err, context.Canceled)
}
