package training_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/job"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/eidolon-sim/eidolon/core/scenario/training"
)

// Expert TP 1 with TP 2 (Megatron-Core --expert-tensor-parallel-size 1):
// the TP ranks of a replica are EP ranks of their own, with whole experts.
// Per GPU the expert FLOPs and weights are those of EP 4 × expert TP 2 over
// the same 8 ranks per stage; the MoE layer runs no TP collective.
func TestMoEExpertTPOne(t *testing.T) {
	etp1 := run(t, moe(1, `"tp":2,"dp":4,"ep":8,"expert_tp":1,"sequence_parallel":true,"global_batch":8,"zero":1`, `,"timeline_ranks":[0]`))
	etp2 := run(t, moe(1, `"tp":2,"dp":4,"ep":4,"sequence_parallel":true,"global_batch":8,"zero":1`, `,"timeline_ranks":[0]`))
	sum := func(rows []job.TimelineRow) (flops float64, moeTP int) {
		for _, r := range rows {
			if r.Rank != 0 {
				continue
			}
			flops += r.FLOPs
			if strings.Contains(r.Name, "moe.tp.") {
				moeTP++
			}
		}
		return
	}
	f1, tp1 := sum(etp1.Tables[2].Rows.([]job.TimelineRow))
	f2, tp2 := sum(etp2.Tables[2].Rows.([]job.TimelineRow))
	require.InEpsilon(t, f2, f1, 1e-9, "the same FLOPs per GPU")
	require.Zero(t, tp1, "no TP collective in the MoE layer with expert TP 1")
	require.Positive(t, tp2)
	s1 := etp1.Tables[0].Rows.([]training.SummaryRow)[0]
	s2 := etp2.Tables[0].Rows.([]training.SummaryRow)[0]
	require.InEpsilon(t, s2.MemoryPeakBytes, s1.MemoryPeakBytes, 0.02, "the same expert weights per GPU")
}

// overlap_ep_comm merges each steady-state backward with the next forward:
// the all-to-alls overlap compute, so the exposed communication falls and
// the step with it; the extra warm-up holds more activations.
func TestMoEOverlapEPComm(t *testing.T) {
	base := `"pp":2,"dp":8,"ep":8,"global_batch":64`
	plain := run(t, moe(2, base, ""))
	over := run(t, moe(2, base+`,"overlap_ep_comm":true`, ""))
	p := plain.Tables[0].Rows.([]training.SummaryRow)[0]
	o := over.Tables[0].Rows.([]training.SummaryRow)[0]
	require.Less(t, o.StepTimeS, p.StepTimeS)
	require.Less(t, o.ExposedCommS, p.ExposedCommS)
	require.Greater(t, o.MemoryPeakBytes, p.MemoryPeakBytes)
	t.Logf("step %.4g → %.4g s, exposed comm %.4g → %.4g s", p.StepTimeS, o.StepTimeS, p.ExposedCommS, o.ExposedCommS)
}

func TestMoEBadExpertTP(t *testing.T) {
	_, _, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(moe(1, `"tp":4,"dp":2,"ep":8,"expert_tp":2,"sequence_parallel":true,"global_batch":8`, "")))
	require.ErrorContains(t, err, "parallel.expert_tp")
	_, _, err = all.Run(scenario.Env{Ctx: context.Background()}, []byte(moe(1, `"tp":2,"dp":4,"ep":1,"expert_tp":1,"sequence_parallel":true,"global_batch":8`, "")))
	require.ErrorContains(t, err, "parallel.ep")
}

// Expert TP 1 under skewed routing: each unit (a replica's TP pair) holds
// two EP ranks and runs at the pace of the more loaded one, so the step is
// slower than balanced, and the overlap still helps.
func TestMoEExpertTPOneSkewed(t *testing.T) {
	par := `"tp":2,"dp":8,"ep":8,"expert_tp":1,"sequence_parallel":true,"pp":2,"global_batch":64`
	zipf := `,"routing":{"distribution":"zipf","skew":1.2,"seed":3}`
	bal := run(t, moe(4, par, "")).Tables[0].Rows.([]training.SummaryRow)[0]
	skew := run(t, moe(4, par, zipf)).Tables[0].Rows.([]training.SummaryRow)[0]
	over := run(t, moe(4, par+`,"overlap_ep_comm":true`, zipf)).Tables[0].Rows.([]training.SummaryRow)[0]
	require.Greater(t, skew.ExpertLoadMax, 1.0)
	require.Greater(t, skew.StepTimeS, bal.StepTimeS)
	require.Less(t, over.StepTimeS, skew.StepTimeS)
}
