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

// Transformer Engine's comm-GEMM overlap (parallel.tp_comm_overlap): the
// forward's column-parallel GEMMs run as TP chunks under a ring of
// point-to-point steps, its row-parallel ones as four splits each followed
// by its share of the reduce-scatter; the chunks do the unsplit GEMMs'
// FLOPs, the communication moves the same bytes, and less of it is
// exposed.
func TestTPCommOverlap(t *testing.T) {
	const par = `"tp":8,"pp":1,"dp":1,"global_batch":1,"sequence_parallel":true`
	spec := func(extra string) string {
		return small(1, par+extra, `,"timeline_ranks":[0]`)
	}
	plain, ring := run(t, spec("")), run(t, spec(`,"tp_comm_overlap":true`))
	sum := func(res []job.TimelineRow, keep func(job.TimelineRow) bool) (n int, flops, bytes float64) {
		for _, r := range res {
			if keep(r) {
				n++
				flops += r.FLOPs
				bytes += r.Bytes
			}
		}
		return n, flops, bytes
	}
	pt, rt := plain.Tables[2].Rows.([]job.TimelineRow), ring.Tables[2].Rows.([]job.TimelineRow)
	fwd := func(name string) func(job.TimelineRow) bool {
		return func(r job.TimelineRow) bool { return strings.Contains(r.Name, ".fwd."+name) }
	}
	// Four layers: the QKV GEMM in 8 chunks under 7 ring steps each.
	n, chunkFLOPs, _ := sum(rt, fwd("attn.qkv.chunk"))
	require.Equal(t, 4*8, n)
	_, whole, _ := sum(pt, func(r job.TimelineRow) bool { return strings.HasSuffix(r.Name, ".fwd.attn.qkv..attn.out") })
	require.Positive(t, whole)
	n, _, _ = sum(rt, fwd("attn.all_gather.ring"))
	require.Equal(t, 4*7, n)
	// The MLP's down projection in 4 splits, each reduce-scattering a
	// quarter: the bytes of the one reduce-scatter they replace.
	n, _, split := sum(rt, fwd("mlp.reduce_scatter.split"))
	require.Equal(t, 4*4, n)
	_, _, rs := sum(pt, fwd("mlp.reduce_scatter"))
	require.InEpsilon(t, rs, split, 1e-9)
	// The chunks do the work of the GEMMs they split: every compute task's
	// FLOPs add up to the same step.
	_, a, _ := sum(pt, func(r job.TimelineRow) bool { return r.Stream == "compute" })
	_, b, _ := sum(rt, func(r job.TimelineRow) bool { return r.Stream == "compute" })
	require.InEpsilon(t, a, b, 1e-9)
	require.InEpsilon(t, whole, chunkFLOPs+func() float64 {
		_, f, _ := sum(rt, fwd("attn.flash"))
		_, o, _ := sum(rt, fwd("attn.out.chunk"))
		return f + o
	}(), 1e-9)
	// Less of the tensor-parallel communication is exposed.
	ps, rs2 := plain.Tables[0].Rows.([]training.SummaryRow)[0], ring.Tables[0].Rows.([]training.SummaryRow)[0]
	require.Less(t, rs2.ExposedCommS, ps.ExposedCommS)
}

// tp_comm_overlap splits the sequence-parallel collectives: without
// sequence parallelism there are none, and the spec says so.
func TestTPCommOverlapNeedsSequenceParallel(t *testing.T) {
	_, _, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(small(1, `"tp":8,"pp":1,"dp":1,"global_batch":1,"tp_comm_overlap":true`, "")))
	require.ErrorContains(t, err, "parallel.tp_comm_overlap")
}
