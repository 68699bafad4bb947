package exec

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/eidolon-sim/eidolon/core/workload"
)

// Two passes merged as overlap_ep_comm merges a backward and the next
// forward (workload.Interleave): each pass is compute c, an all-to-all a on
// the EP stream, compute c. Alone they take 2(2c + a). Merged, each pass's
// all-to-all runs under the other pass's compute: the step is
// 4c + 2·max(0, a − c), the all-to-all exposed only by what the other
// pass's segment does not cover. The "all-to-all" here is an all-reduce
// of S bytes over a DGX A100's 8 GPUs, a = 2(n−1)/n·S/B + 2(n−1)·1 µs.
func TestOverlapEPCommClosedForm(t *testing.T) {
	const B, n, c = 300e9, 8.0, 1e-3
	for _, S := range []float64{32 << 20, 1 << 30} {
		a := 2*(n-1)/n*S/B + 2*(n-1)*1e-6
		build := func(merge bool) *workload.Plan {
			plan := onePlan(S, 0)
			prog := &plan.Programs[0]
			ops := []model.Op{{Name: "gemm", Kind: model.GEMM}}
			for k, name := range []string{"bwd", "fwd"} {
				i := int32(len(prog.Tasks))
				prog.Tasks = append(prog.Tasks,
					workload.Task{Name: name + ".c1", Kind: workload.Compute, Stream: workload.StreamCompute, Ops: ops},
					workload.Task{Name: name + ".a2a", Kind: workload.Collective, Stream: workload.StreamEP, Coll: model.AllReduce,
						Bytes: S, Slot: workload.SlotTP, Tag: int32(k), Deps: []int32{i}},
					workload.Task{Name: name + ".c2", Kind: workload.Compute, Stream: workload.StreamCompute, Ops: ops, Deps: []int32{i + 1}})
			}
			if merge {
				workload.Interleave(prog, 0, 3)
			}
			return plan
		}
		plain, err := Run(context.Background(), build(false), Options{Fabric: dgx(t, 1), Cost: fixedCost})
		require.NoError(t, err)
		merged, err := Run(context.Background(), build(true), Options{Fabric: dgx(t, 1), Cost: fixedCost})
		require.NoError(t, err)
		require.InEpsilon(t, 2*(2*c+a), plain.End.Seconds(), 1e-6, "S = %g", S)
		require.InEpsilon(t, 4*c+2*max(0, a-c), merged.End.Seconds(), 1e-6, "S = %g (a = %g s)", S, a)
		st := merged.Ranks()
		require.InEpsilon(t, 4*c, st[0].Compute.Seconds(), 1e-9)
		if a < c {
			require.Zero(t, st[0].ExposedComm.Seconds(), "a shorter all-to-all hides entirely")
		}
	}
}
