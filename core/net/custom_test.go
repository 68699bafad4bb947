package net

import (
	"testing"

	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/topo"
	"github.com/stretchr/testify/require"
)

// vLLM's custom all-reduce on one DGX H100 (8 GPUs on NVSwitch, 450 GB/s
// each way): alone on its links it takes its kernel's latency plus the
// bytes a rank reads at the kernel's share of the link: one-shot below
// 256 KiB ((n−1)·S read), two-shot from there to below 8 MiB
// (2(n−1)/n·S); from 8 MiB, across nodes, or on a rank count vLLM does not
// serve, it is NCCL's tuner exactly.
func TestCustomAllReduceClosedForms(t *testing.T) {
	node, err := topo.Preset("dgx-h100", 1)
	require.NoError(t, err)
	nodes2, err := topo.Preset("dgx-h100", 2)
	require.NoError(t, err)
	run := func(tp *topo.Topology, alg Algorithm, bytes float64, ranks []int) float64 {
		return runOne(t, NewFlowNet(sim.New(), tp), Collective{Op: AllReduce, Algorithm: alg, Bytes: bytes, Ranks: ranks})
	}
	const n, link = 8.0, 450e9
	oneBW, twoBW := CustomOneShotLinkShare*link, CustomTwoShotLinkShare*link
	for _, c := range []struct {
		bytes, want float64
	}{
		{80 << 10, CustomOneShotLatencyS + (n-1)*(80<<10)/oneBW},
		{255 << 10, CustomOneShotLatencyS + (n-1)*(255<<10)/oneBW},
		{256 << 10, CustomTwoShotLatencyS + 2*(n-1)/n*(256<<10)/twoBW},
		{8<<20 - 16, CustomTwoShotLatencyS + 2*(n-1)/n*(8<<20-16)/twoBW},
	} {
		require.InEpsilon(t, c.want, run(node, Custom, c.bytes, all(8)), 1e-3, "%g bytes", c.bytes)
	}
	// 2 GPUs: one-shot at every size below 8 MiB.
	require.InEpsilon(t, CustomOneShotLatencyS+(4<<20)/oneBW, run(node, Custom, 4<<20, []int{0, 1}), 1e-3)
	// Where vLLM hands the all-reduce to NCCL, the time is NCCL's.
	for _, c := range []struct {
		tp    *topo.Topology
		bytes float64
		ranks []int
	}{
		{node, 8 << 20, all(8)},
		{node, 80 << 10, all(3)},
		{nodes2, 80 << 10, all(16)},
		{nodes2, 80 << 10, []int{0, 8}},
	} {
		require.InEpsilon(t, run(c.tp, NCCL, c.bytes, c.ranks), run(c.tp, Custom, c.bytes, c.ranks), 1e-12, "%g bytes on %v", c.bytes, c.ranks)
	}
	ok, err := VLLMCustom.Eligible(&Comms{t: nodes2}, []int{0, 8}, 80<<10)
	require.NoError(t, err)
	require.False(t, ok, "ranks on two nodes are not NVLink peers")
}

// TensorRT-LLM's rules on the same node: the same kernels with decimal
// limits (one-shot below 500,000 bytes on 8 ranks and 1,000,000 on 4,
// custom up to and including 8,000,000 bytes on more than 2 ranks and
// 16,000,000 on 2), NCCL's tuner beyond.
func TestCustomAllReduceTensorRTLLMRules(t *testing.T) {
	node, err := topo.Preset("dgx-h100", 1)
	require.NoError(t, err)
	run := func(alg Algorithm, bytes float64, ranks []int) float64 {
		return runOne(t, NewFlowNet(sim.New(), node), Collective{Op: AllReduce, Algorithm: alg, Bytes: bytes, Ranks: ranks})
	}
	const link = 450e9
	oneBW, twoBW := CustomOneShotLinkShare*link, CustomTwoShotLinkShare*link
	oneShot := func(n, bytes float64) float64 { return CustomOneShotLatencyS + (n-1)*bytes/oneBW }
	twoShot := func(n, bytes float64) float64 { return CustomTwoShotLatencyS + 2*(n-1)/n*bytes/twoBW }
	for _, c := range []struct {
		bytes float64
		ranks []int
		want  float64
	}{
		{300 << 10, all(8), oneShot(8, 300<<10)}, // vLLM: two-shot from 256 KiB
		{500e3 - 16, all(8), oneShot(8, 500e3-16)},
		{500e3, all(8), twoShot(8, 500e3)},
		{800e3, all(4), oneShot(4, 800e3)},
		{1e6, all(4), twoShot(4, 1e6)},
		{8e6, all(8), twoShot(8, 8e6)},
		{12e6, []int{0, 1}, oneShot(2, 12e6)},
		{16e6, []int{0, 1}, oneShot(2, 16e6)},
	} {
		require.InEpsilon(t, c.want, run(CustomTRTLLM, c.bytes, c.ranks), 1e-3, "%g bytes on %d ranks", c.bytes, len(c.ranks))
	}
	// 8,192,000 bytes (a 500-token prompt of an 8,192-wide model in 16
	// bits): vLLM's two-shot, TensorRT-LLM's NCCL.
	const prompt = 500 * 8192 * 2
	require.InEpsilon(t, twoShot(8, prompt), run(Custom, prompt, all(8)), 1e-3)
	require.InEpsilon(t, run(NCCL, prompt, all(8)), run(CustomTRTLLM, prompt, all(8)), 1e-12)
	require.InEpsilon(t, run(NCCL, 16e6+16, []int{0, 1}), run(CustomTRTLLM, 16e6+16, []int{0, 1}), 1e-12)
	require.Equal(t, CustomTRTLLM, CustomFor("tensorrt_llm"))
	require.Equal(t, Custom, CustomFor("vllm"))
	require.Equal(t, Custom, CustomFor(""))
}
