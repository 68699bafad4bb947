package exec

import (
	"context"
	"testing"

	"github.com/eidolon-sim/eidolon/core/compute"
	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/topo"
	"github.com/eidolon-sim/eidolon/core/workload"
	"github.com/stretchr/testify/require"
)

// setup builds a DGX A100 cluster of `nodes` nodes with congestion.
func setup(t testing.TB, nodes int) Options {
	tp, err := topo.Preset("dgx-a100", nodes)
	require.NoError(t, err)
	k := sim.New()
	gpu, ok := hw.GPUByName("a100-80gb-sxm")
	require.True(t, ok)
	ev := compute.NewEvaluator(gpu)
	return Options{Fabric: net.NewFlowNet(k, tp), Cost: func(o model.Op) (float64, error) {
		c, err := ev.Op(o)
		return c.TimeS, err
	}}
}

func gptTraining(t testing.TB, name string, par workload.Parallel) workload.Training {
	c, ok := model.ByName(name)
	require.True(t, ok)
	return workload.Training{Model: c, Par: par, SeqLen: 2048, DType: hw.FP16, UnfusedAttention: true}
}

func TestSmoke22B(t *testing.T) {
	tr := gptTraining(t, "gpt-22b", workload.Parallel{TP: 8, PP: 1, DP: 1, MicroBatch: 4, GlobalBatch: 4,
		Schedule: workload.OneFOneB, VirtualStages: 1, Recompute: model.RecomputeFull})
	pl, err := workload.BuildTraining(tr)
	require.NoError(t, err)
	opt := setup(t, 1)
	res, err := Run(context.Background(), pl.Plan, opt)
	require.NoError(t, err)
	t.Logf("step %v, collectives %d reused %d", res.End, res.Collectives, res.Reused)
	st := res.Ranks()
	t.Logf("%+v", st[0])
}
