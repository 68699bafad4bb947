package fidelity

import (
	"fmt"
	"math"
	"strings"

	"github.com/eidolon-sim/eidolon/core/compute"
	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
)

// teGEMMSrc is Transformer Engine's GEMM benchmark on an H200 NVL: its
// "model config" mode times the twelve GEMM shapes of a 5B model's layer
// (hidden 4,096, MLP 16,384, 32 heads, micro-batch 31 × sequence 512 =
// 15,872 tokens) with CUDA events over 100 back-to-back te.Linear forward
// calls (torch.matmul for BF16), each after a leading GEMM.
const teGEMMSrc = "NVIDIA/TransformerEngine docs/examples/gemm_profiling/gemm_profiling.rst, \"Worked Example: 5B Model on H200\" " +
	"(benchmarks/gemm/benchmark_gemm.py, H200 NVL)"

// teGEMMTokens, teGEMMHidden and teGEMMMLP are the benchmark's model config.
const teGEMMTokens, teGEMMHidden, teGEMMMLP = 15872, 4096, 16384

// TEGEMMGroups are the benchmark's three groups of four shapes, each
// {m, k, n} as one te.Linear(k, n) call on an m×k input: the forward
// GEMMs (QKV, attention out, MLP up, MLP down), the input gradients' shapes
// (K and N swapped) and the weight gradients' (the tokens the reduction).
var TEGEMMGroups = func() []struct {
	Name   string
	Shapes [][3]int64
} {
	const m, h, i = teGEMMTokens, teGEMMHidden, teGEMMMLP
	return []struct {
		Name   string
		Shapes [][3]int64
	}{
		{"Fprop", [][3]int64{{m, h, 3 * h}, {m, h, h}, {m, h, i}, {m, i, h}}},
		{"Dgrad", [][3]int64{{m, 3 * h, h}, {m, h, h}, {m, i, h}, {m, h, i}}},
		{"Wgrad", [][3]int64{{h, m, 3 * h}, {h, m, h}, {h, m, i}, {i, m, h}}},
	}
}()

// TEGEMMMeasured is the benchmark's per-layer time of each group, ms, by
// precision: "BF16", "FP8Delayed", "FP8Current" and "FP8Block" from its
// autocast table (each call quantizes its input and weight before the
// GEMM), "FP8Current pre-quantized" from its pre-quantized table (the GEMM
// alone; block scaling has none on Hopper).
var TEGEMMMeasured = map[string][3]float64{
	"BF16":                     {10.653, 10.813, 10.548},
	"FP8Delayed":               {6.188, 6.306, 6.484},
	"FP8Current":               {6.503, 6.795, 6.987},
	"FP8Block":                 {7.425, 7.636, 7.821},
	"FP8Current pre-quantized": {5.577, 5.661, 5.547},
}

// TEGEMMPrecisions is TEGEMMMeasured's order in the report.
var TEGEMMPrecisions = []string{"BF16", "FP8Current pre-quantized", "FP8Delayed", "FP8Current", "FP8Block"}

// teGEMMCall is one benchmark call of shape {m, k, n} in a precision, as
// the training kind builds a Transformer Engine FP8 linear layer: under
// autocast the weight requires a gradient, so the input and the weight are
// each cast as is and transposed (FP8CastTranspose), after an amax pass
// under current scaling (FP8Amax); the GEMM runs with fast accumulation,
// block scaling's with its per-128 promotion (Op.SplitAccumulator).
func teGEMMCall(p string, sh [3]int64) []model.Op {
	m, k, n := sh[0], sh[1], sh[2]
	if p == "BF16" {
		return []model.Op{model.NewGEMM("gemm", hw.BF16, 1, m, n, k)}
	}
	g := model.NewGEMM("gemm", hw.FP8, 1, m, n, k)
	g.SplitAccumulator = p == "FP8Block"
	if strings.HasSuffix(p, "pre-quantized") {
		return []model.Op{g}
	}
	var ops []model.Op
	for _, n := range []float64{float64(m * k), float64(k * n)} {
		if p == "FP8Current" {
			ops = append(ops, model.FP8Amax("amax", hw.BF16, n))
		}
		ops = append(ops, model.FP8CastTranspose("cast", hw.BF16, n))
	}
	return append(ops, g)
}

// TEGEMMPrices is the model's time of each group, ms, by precision, on the
// h200-nvl preset (the H100's fitted kernel parameters at the NVL card's
// datasheet peaks and clock; nothing fitted to this benchmark).
func TEGEMMPrices() (map[string][3]float64, error) {
	g, ok := hw.GPUByName("h200-nvl")
	if !ok {
		return nil, fmt.Errorf("no h200-nvl preset")
	}
	e := compute.NewEvaluator(g)
	out := map[string][3]float64{}
	for _, p := range TEGEMMPrecisions {
		var t [3]float64
		for i, grp := range TEGEMMGroups {
			for _, sh := range grp.Shapes {
				for _, o := range teGEMMCall(p, sh) {
					c, err := e.Op(o)
					if err != nil {
						return nil, err
					}
					t[i] += 1e3 * c.TimeS
				}
			}
		}
		out[p] = t
	}
	return out, nil
}

// TEGEMMReport is KERNELS.md's section on the benchmark; it also returns
// the largest |error| of its cells.
func TEGEMMReport() (string, float64, error) {
	price, err := TEGEMMPrices()
	if err != nil {
		return "", 0, err
	}
	var b strings.Builder
	b.WriteString("\n### Transformer Engine's GEMM benchmark (H200 NVL)\n\n")
	b.WriteString(teGEMMSrc + ": a 5B model's layer GEMMs (15,872 tokens, hidden 4,096, MLP 16,384), each group's four shapes summed, " +
		"BF16 against Transformer Engine's FP8 recipes. Each FP8 call under autocast casts its input and its weight (both as is and " +
		"transposed, the weight requiring a gradient) before the GEMM: delayed scaling in one pass, current scaling after a pass that " +
		"takes the tensor's amax (fp8_recipe tensorwise), block scaling with the GEMM promoting its partial sums every 128 elements. " +
		"Priced on the h200-nvl preset, the H100's fitted kernel parameters at the NVL card's datasheet peaks and clock: a part with no " +
		"kernel table, and nothing fitted to these figures.\n\n")
	b.WriteString("| precision | group | measured ms | model ms | error |\n|---|---|---:|---:|---:|\n")
	worst, blockLo, blockHi := 0.0, math.Inf(1), 0.0
	for _, p := range TEGEMMPrecisions {
		for i, grp := range TEGEMMGroups {
			x := price[p][i]/TEGEMMMeasured[p][i] - 1
			worst = math.Max(worst, math.Abs(x))
			if p == "FP8Block" {
				blockLo, blockHi = math.Min(blockLo, -x), math.Max(blockHi, -x)
			}
			fmt.Fprintf(&b, "| %s | %s | %.3f | %.3f | %s |\n", p, grp.Name, TEGEMMMeasured[p][i], price[p][i], signedPct(x))
		}
	}
	fmt.Fprintf(&b, "\nLargest |error|: %s. Block scaling's quantizers are priced with the per-tensor cast's bytes; its calls come out "+
		"%s–%s fast, what its per-block scales and 2D weight blocks cost beyond them and the promotion.\n", pct(worst), pct(blockLo), pct(blockHi))
	return b.String(), worst, nil
}
