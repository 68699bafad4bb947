package inference_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/eidolon-sim/eidolon/core/scenario/inference"
)

// Wide EP: a 4-layer DeepSeek-V3 (3 dense + 1 MoE, MLA) served by 16
// single-GPU replicas on two DGX H800 nodes. EP 16 shards the 256 experts
// (16 per GPU) and adds the dispatch/combine all-to-alls to every decode
// step; the MLA cache is (512+64)·2 bytes per token and layer.
func TestInferenceWideEP(t *testing.T) {
	run := func(ep int) inference.SummaryRow {
		js := fmt.Sprintf(`{"kind":"inference","model":{"preset":"deepseek-v3","layers":4},"gpu":"h800",
			"cluster":{"preset":"dgx-h800","nodes":2},"replicas":16,"ep":%d,"batch":32,"prompt_tokens":256,"output_tokens":8,"dtype":"fp8"}`, ep)
		_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
		require.NoError(t, err)
		return res.Tables[0].Rows.([]inference.SummaryRow)[0]
	}
	one, wide := run(1), run(16)
	t.Logf("TPOT ep1 %.4g s, ep16 %.4g s; memory %.3g vs %.3g GB", one.TPOTS, wide.TPOTS, one.MemoryPeakBytes/1e9, wide.MemoryPeakBytes/1e9)
	assert.Less(t, wide.MemoryPeakBytes, one.MemoryPeakBytes, "experts are sharded")
	assert.Greater(t, wide.TPOTS, 0.0)
	// Expert weights: 1 MoE layer × 256 experts × 3·7168·2048, kept in
	// 16 bits (the memory model stores 8-bit-math weights as bf16); EP 16
	// keeps 1/16 of them. The largest operator's workspace differs a little.
	experts := 256 * 3 * 7168 * 2048 * 2.0
	assert.InEpsilon(t, experts*15/16, one.MemoryPeakBytes-wide.MemoryPeakBytes, 0.05)
}
