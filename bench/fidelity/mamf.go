package fidelity

import (
	"fmt"
	"strings"

	"github.com/eidolon-sim/eidolon/core/compute"
	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
)

// mamfSrc is the Maximum Achievable Matmul FLOPS table: for each part, the
// fastest shape a search of mamf-finder.py found and its rate. BF16 runs
// torch.mm; FP8 runs torch._scaled_mm (E4M3, per-tensor scales of 1) with
// its default use_fast_accum=False, cuBLAS's split accumulator; each the
// mean of 100 iterations after 50 warm-up ones.
const mamfSrc = "stas00/ml-engineering, compute/accelerator/README.md, \"Maximum Achievable Matmul FLOPS comparison table\" " +
	"(compute/accelerator/benchmarks/mamf-finder.py)"

// MAMFRow is one row of the table, on the preset of its part.
type MAMFRow struct {
	GPU     string
	DType   hw.DType
	M, N, K int64
	// TFLOPS is the measured rate; Torch the PyTorch build it ran.
	TFLOPS float64
	Torch  string
	// Basis says where the preset's kernel parameters come from.
	Basis string
}

// MAMFRows are the table's rows for the parts Eidolon has presets of (the
// H200's BF16 row is the H100's, "H200 is the same", and left out).
var MAMFRows = []MAMFRow{
	{"a100-80gb-sxm", hw.BF16, 1024, 10240, 5120, 271.2, "2.6.0+cu126", "fitted on Vidur's kernels"},
	{"h100-sxm", hw.BF16, 2048, 2048, 13312, 794.5, "2.7.0+cu126", "fitted on Vidur's kernels"},
	{"h100-sxm", hw.FP8, 1024, 9216, 14336, 1402.6, "2.7.0+cu126", "fitted on Vidur's kernels"},
	{"h200", hw.FP8, 1280, 4096, 12032, 1453.4, "2.7.1+cu128", "the H100's, derived"},
	{"b200", hw.BF16, 1792, 16128, 3072, 1745.0, "2.7.1+cu128", "main loop at this row's efficiency"},
	{"b200", hw.FP8, 15360, 4096, 3072, 3432.5, "2.7.1+cu128", "main loop at the BF16 row's efficiency"},
	{"gb200", hw.BF16, 4096, 9728, 2048, 1822.0, "2.10.0.dev20250916+cu130", "the B200's, derived"},
	{"gb200", hw.FP8, 19456, 5120, 1536, 3615.6, "2.10.0.dev20250916+cu130", "the B200's, derived"},
	{"mi300x", hw.BF16, 10240, 15360, 8192, 668.4, "2.5.1+6.3.42131", "main loop at this row's efficiency"},
}

// MAMFPrice is the model's rate for a row, TFLOP/s: the GEMM as the table
// ran it (FP8 with the split accumulator) and, for FP8, with fast
// accumulation.
func MAMFPrice(r MAMFRow) (asRun, fast float64, err error) {
	g, ok := hw.GPUByName(r.GPU)
	if !ok {
		return 0, 0, fmt.Errorf("mamf: no preset %q", r.GPU)
	}
	e := compute.NewEvaluator(g)
	rate := func(split bool) (float64, error) {
		o := model.NewGEMM("mamf", r.DType, 1, r.M, r.N, r.K)
		o.SplitAccumulator = split
		c, err := e.Op(o)
		return c.AchievedFLOPsPerS / 1e12, err
	}
	if asRun, err = rate(r.DType == hw.FP8); err != nil {
		return 0, 0, err
	}
	fast, err = rate(false)
	return asRun, fast, err
}

// MAMFReport is KERNELS.md's section on the table.
func MAMFReport() (string, error) {
	var b strings.Builder
	b.WriteString("\n### Best-shape matmuls against the MAMF table\n\n")
	b.WriteString(mamfSrc + ": for each part, the fastest shape a search of shapes found, BF16 through torch.mm and FP8 through " +
		"torch._scaled_mm, which runs cuBLAS's split accumulator unless told otherwise (priced so: the FP8 GEMM promoting its partial sums " +
		"every 128 elements on Hopper; the last column without). No fitted parameter uses it; the B200's and MI300X's main-loop " +
		"efficiencies are taken from it, as their rows say (TestMAMFRowsMatchPresets). Each figure is the maximum over many timed " +
		"shapes, so it sits above what a given shape runs at; the fitted parameters are those of the shapes layers run (the Vidur rows " +
		"above).\n\n")
	b.WriteString("| GPU | type | best shape M×N×K | torch | MAMF TFLOP/s | model TFLOP/s | error | kernel parameters | model, fast accumulation |\n" +
		"|---|---|---|---|---:|---:|---:|---|---:|\n")
	// The H100's measured and priced rates by type, for the note below.
	type mamfPriced struct{ TFLOPS, asRun, fast float64 }
	hopper := map[hw.DType]mamfPriced{}
	for _, r := range MAMFRows {
		asRun, fast, err := MAMFPrice(r)
		if err != nil {
			return "", err
		}
		fastCol := "—"
		if r.DType == hw.FP8 {
			fastCol = fmt.Sprintf("%.1f (%s)", fast, signedPct(fast/r.TFLOPS-1))
		}
		if r.GPU == "h100-sxm" {
			hopper[r.DType] = mamfPriced{r.TFLOPS, asRun, fast}
		}
		fmt.Fprintf(&b, "| %s | %s | %d×%d×%d | %s | %.1f | %.1f | %s | %s | %s |\n",
			r.GPU, r.DType, r.M, r.N, r.K, r.Torch, r.TFLOPS, asRun, signedPct(asRun/r.TFLOPS-1), r.Basis, fastCol)
	}
	if bf, f8 := hopper[hw.BF16], hopper[hw.FP8]; bf.TFLOPS > 0 && f8.TFLOPS > 0 {
		fmt.Fprintf(&b, "\nOn the H100 the FP8 row is timed with the split accumulator, and the model's split-accumulator price, its "+
			"promotion's adds in series with the MMAs that produced them (%s on top of the fast price at this shape), is %s below it; "+
			"its fast-accumulation price is %s below, about as far as the BF16 price is below the BF16 row (%s). A best-of-search figure "+
			"cannot tell whether cuBLAS hides its promotion at this shape: torchao measures fast accumulation 1.1–1.2× faster on its FP8 "+
			"training GEMMs (pytorch/ao issue 2377), which is what core/compute prices.\n",
			pct(f8.fast/f8.asRun-1), pct(1-f8.asRun/f8.TFLOPS), pct(1-f8.fast/f8.TFLOPS), pct(1-bf.asRun/bf.TFLOPS))
	}
	b.WriteString("\nThe B200 and GB200 rows are bound by the L2 bandwidth Hopper's figure per SM and clock gives them (core/hw/presets.go: " +
		"Blackwell's tensor-memory accumulators and 2-SM MMAs are not modelled). The MI300X row is its preset's main-loop efficiency " +
		"with no tile overhead, so it checks only that nothing else binds at that shape.\n")
	return b.String(), nil
}
