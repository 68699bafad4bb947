package net

import (
	"strings"

	"github.com/eidolon-sim/eidolon/core/sim"
)

// The inference engines' own all-reduce for small messages inside one
// NVLink domain: vLLM's custom all-reduce (csrc/custom_all_reduce.cuh,
// vllm/distributed/device_communicators/custom_all_reduce.py; SGLang and
// TensorRT-LLM run the same two kernels). Every rank's buffer is mapped
// into its peers' address space, and one kernel either reads every peer's
// whole buffer and reduces it locally (one-shot, cross_device_reduce_1stage)
// or reduces its 1/n share from every peer and then gathers the others'
// reduced shares (two-shot, cross_device_reduce_2stage: a reduce-scatter
// and an all-gather, Direct's two phases).

const (
	// OneShot: one phase in which every rank reads the whole buffer from
	// every other rank ((n−1)·S in per rank) and reduces it itself.
	OneShot Algorithm = "one_shot"
	// Custom: the engine's custom all-reduce: one-shot or two-shot as vLLM
	// picks them, where vLLM runs it (VLLMCustom), else NCCL's tuner.
	Custom Algorithm = "custom"
	// CustomTRTLLM: the same kernels as TensorRT-LLM's engines pick them
	// (TRTLLMCustom), else NCCL's tuner.
	CustomTRTLLM Algorithm = "custom_tensorrt_llm"
)

// The custom all-reduce's kernel costs. Each kernel's latency and the
// share of its link at which a rank reads its peers are fitted (least
// squares, within 10 % of every point) on vLLM's own benchmark of the two
// kernels on H100 (NVLink 450 GB/s each way) with CUDA graphs, 0.5–4 MiB
// at TP 4 and 6 (benchmarks/kernels/benchmark_device_communicators.py in
// vllm-project/vllm PRs #24111 and #24532: ca_1stage 10–70 µs, ca_2stage
// 15–43 µs): time = latency + bytes a rank reads / (share × link), the
// one-shot reading (n−1)·S, the two-shot 2(n−1)/n·S. Measured outside CUDA
// graphs (the input copied into the registered buffer, launches exposed)
// the same kernels take 8.5–10 µs up to 32 KiB (sgl-project/sglang PR
// #2904); a decode step replays them from a graph, which the fit's regime
// is. No A100 measurement was found: the same latencies and link shares
// serve every GPU and both engines' rules.
const (
	CustomOneShotLatencyS  = 4.64e-6
	CustomOneShotLinkShare = 0.751
	CustomTwoShotLatencyS  = 12.6e-6
	CustomTwoShotLinkShare = 0.528
)

// CustomRules are where an engine runs its custom all-reduce and which of
// the two kernels it picks. Both engines serve 2, 4, 6 or 8 ranks whose
// every pair NVLink connects, and hand everything else to NCCL.
type CustomRules struct {
	// Engine names the engine whose rules these are.
	Engine string
	// maxBytes is the largest payload the engine's registered buffer takes
	// on n ranks; inclusive says whether a payload of exactly that size
	// still runs custom.
	maxBytes  func(n int) float64
	inclusive bool
	// oneShot reports whether the engine picks the one-shot kernel.
	oneShot func(n int, bytes float64) bool
}

// VLLMCustom are vLLM's rules (SGLang runs the same): an 8 MiB buffer
// (custom_all_reduce.py max_size; should_custom_ar: inp_size < max_size)
// on 2, 4, 6 or 8 GPUs (_SUPPORTED_WORLD_SIZES); one-shot on 2 GPUs,
// below 512 KiB on up to 4 and below 256 KiB on up to 8, two-shot
// otherwise (custom_all_reduce.cuh, allreduce).
var VLLMCustom = CustomRules{
	Engine:    "vllm",
	maxBytes:  func(int) float64 { return 8 << 20 },
	inclusive: false,
	oneShot: func(n int, bytes float64) bool {
		return n == 2 || (n <= 4 && bytes < 512<<10) || (n <= 8 && bytes < 256<<10)
	},
}

// TRTLLMCustom are TensorRT-LLM's rules for a built engine's all-reduce
// plugin with the AUTO strategy (cpp/tensorrt_llm/plugins/ncclPlugin/
// allreducePlugin.cpp, selectImplementation; its workspace
// customAllReduceUtils::getMaxRequiredWorkspaceSize): custom up to and
// including 16,000,000 bytes on 2 ranks and 8,000,000 on more, one-shot on
// 2 ranks, below 1,000,000 bytes on up to 4 and below 500,000 on more,
// two-shot otherwise; even rank counts up to 8 on P2P NVLink peers
// (isCustomAllReduceSupported, setGroupTopology). The decimal limits sit
// just below vLLM's binary ones, so a 500-token prompt of an 8,192-wide
// model (8,192,000 bytes) runs two-shot in vLLM and NCCL in TensorRT-LLM.
var TRTLLMCustom = CustomRules{
	Engine: "tensorrt_llm",
	maxBytes: func(n int) float64 {
		if n <= 2 {
			return 16e6
		}
		return 8e6
	},
	inclusive: true,
	oneShot: func(n int, bytes float64) bool {
		return n <= 2 || (n <= 4 && bytes < 1e6) || bytes < 500e3
	},
}

// CustomEngines lists the engines whose custom all-reduce rules are
// modelled, the default first.
func CustomEngines() []string { return []string{VLLMCustom.Engine, TRTLLMCustom.Engine} }

// CustomFor is the custom all-reduce algorithm of an engine named in
// CustomEngines ("" is the default's).
func CustomFor(engine string) Algorithm {
	if engine == TRTLLMCustom.Engine {
		return CustomTRTLLM
	}
	return Custom
}

// Eligible reports whether the engine runs its custom all-reduce for a
// payload of bytes over ranks.
func (r CustomRules) Eligible(c *Comms, ranks []int, bytes float64) (bool, error) {
	switch len(ranks) {
	case 2, 4, 6, 8:
	default:
		return false, nil
	}
	limit := r.maxBytes(len(ranks))
	if !(bytes > 0) || bytes > limit || (bytes == limit && !r.inclusive) {
		return false, nil
	}
	if err := c.ranksInRange(ranks); err != nil {
		return false, err
	}
	for _, a := range ranks {
		for _, b := range ranks {
			if a == b {
				continue
			}
			path, _, err := c.route(a, b)
			if err != nil {
				return false, err
			}
			for _, l := range path {
				if !strings.HasPrefix(c.t.Links[l].Tech, "nvlink") {
					return false, nil
				}
			}
		}
	}
	return true, nil
}

// buildOneShot: every rank sends its whole buffer (in Chunks pieces) to
// every other rank in one phase.
func buildOneShot(_ *Comms, col *Collective) (program, error) {
	return &directProg{chunks: col.Chunks, n: len(col.Ranks), phases: 1, bytes: col.Bytes / float64(col.Chunks)}, nil
}

// choose picks the engine's kernel for an all-reduce it serves (one-shot,
// or Direct as two-shot) at its share of the link, with the rest of its
// latency before the data moves; elsewhere it is NCCL's tuner.
func (r CustomRules) choose(c *Comms, col *Collective, shape *checkedShape) error {
	ok, err := r.Eligible(c, col.Ranks, col.Bytes)
	if err != nil {
		return err
	}
	if !ok {
		return tuneNCCL(c, col, shape)
	}
	n := len(col.Ranks)
	ch := NCCLChoice{Algorithm: Direct, LatencyS: CustomTwoShotLatencyS, Channels: 1}
	phases, read, share := 2, 2*float64(n-1)/float64(n)*col.Bytes, CustomTwoShotLinkShare
	if r.oneShot(n, col.Bytes) {
		ch.Algorithm, ch.LatencyS = OneShot, CustomOneShotLatencyS
		phases, read, share = 1, float64(n-1)*col.Bytes, CustomOneShotLinkShare
	}
	col.Algorithm = ch.Algorithm
	// Each rank's link to its peers carries its reads (n−1 flows at once)
	// at the kernel's share of it.
	path, hop, err := c.route(col.Ranks[0], col.Ranks[1])
	if err != nil {
		return err
	}
	link := c.t.Capacity(int(path[0]))
	ch.AlgBytesPerS = col.Bytes * share * link / read
	ch.BusBytesPerS = ch.AlgBytesPerS * BusBandwidthFactor(AllReduce, n)
	ch.ModelTimeS = ch.TimeS(col.Bytes)
	col.ProtocolEfficiency = share
	shape.choice = &ch
	shape.delay = sim.Seconds(max(0, ch.LatencyS-float64(phases)*hop))
	return nil
}
