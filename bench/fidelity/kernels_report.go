package fidelity

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/eidolon-sim/eidolon/core/compute"
	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
)

// KernelCheckPending names the (SKU, class) cells whose held-out median
// |error| is above issue 14's 5 % with today's mechanism, each with what is
// missing; TestKernelHeldOutError skips them by name with the reason and
// asserts the rest, and KERNELS.md lists them.
var KernelCheckPending = map[string]string{
	"h100/gemm": gemmPending,
}

const (
	gemmPending = "the tile is the fastest of the candidate set, not cuBLAS's own pick: cuBLAS sometimes runs a large tile " +
		"and pays its partial wave (H100 640-1024 tokens against 8192-wide outputs run 25-35% slower than the best tile) and " +
		"sometimes a small one; a largest-filling-tile heuristic was tried and came out worse (A100 8.1%, H100 6.9%, before " +
		"the split-K reduction was priced), so the residual scatter of cuBLAS's choices stays in the error: on H100 the " +
		"65-512-token GEMMs come out 5% fast in the median and the 513-4096-token ones 3% slow. The A100 cell meets the " +
		"check at exactly 5.0%, on the line. Also refitted and not kept: Hopper's persistent warp-specialized GEMMs " +
		"(CUTLASS 3's sm90 kernels, whose producer warps load a tile's first K-slices under the previous tile's epilogue) " +
		"priced with one tile's fixed cost a kernel instead of one a wave: H100 held-out 5.9% (training objective 0.0409 " +
		"against 0.0420 refitted without it), with a quarter or half of it still paid a wave 6.2% (0.0411, 0.0418), within " +
		"the stepped loss's 2% tie. Vidur's H100 times grow almost linearly with the tokens from 1,536 on (6,144 × 4,096: " +
		"119, 131, 144 µs at 1,536, 1,792, 2,048), where any tile's partial wave steps; a stream-K candidate for Hopper " +
		"(CUTLASS 3's data-parallel waves, then the partial wave's K-steps spread over every SM, one more fixed cost for its " +
		"fixup) follows that and refits to 5.5% (objective 0.0414; 5.7% and 0.0413 with the persistent variant), also " +
		"within the tie and not under 5%: most of what remains is single-wave GEMMs of 65-512 tokens priced 5-17% fast, " +
		"where cuBLAS runs a tile that leaves SMs idle (192 × 8,192 × 4,096: 53 µs measured, near the 50 µs a 256 × 128 tile on 64 of " +
		"132 SMs would take, against 35.5 µs at 256 tokens). Refitted and not kept either (held-out GEMM medians, A100 / H100): a " +
		"64-row tile's main loop at a fraction of the rate (the 64-row tiles the search picks read 2-15% fast on both GPUs), " +
		"0.9: 5.3% / 6.1%, 0.8: 5.9% / 6.2%; 16- and 32-row tiles for problems of at most that many rows (Ampere's MMA is 16 " +
		"rows high; Vidur's GEMMs of 1-8 tokens read 3-6% slow, of 48-64 tokens 1-2% fast): 5.0% / 6.0%, the H100's main loop " +
		"moving to 0.827 along the valley described above; the same tiles at every size: 4.9% / 6.7%; the compute-bandwidth knee's exponent " +
		"(gemmOverlapP) at 2 and 2.5 instead of 3: 6.2% / 6.6% and 5.3% / 6.2%; Hopper's shared-memory traffic as its " +
		"warpgroup MMAs make it (each 64-row warpgroup reads its A rows and the whole B slice of every K-step from shared " +
		"memory, and TMA writes both slices into it, at 128 bytes a clock an SM, which binds a 64-column tile below the main " +
		"loop's rate; the presets price Ampere's 64 × 64 warp tiles, which never bind): H100 training objective 0.0396 " +
		"refitted from the presets (0.0401 at the valley's fixed point without it), held-out GEMM 6.2% (6.1% counting the " +
		"reads alone), no nearer 5%; the library's pick as a draw over the candidate tiles rather than the best one (each " +
		"candidate weighted by exp(-(t/t_best - 1)/τ), its expected time priced): 5.1% / 6.2% at τ = 0.03 and 5.1% / 6.0% at " +
		"0.08, refitted (the fit moves the main loop faster to pay for the slower draws; 6.5% / 8.3% at 0.02 / 0.1 unrefitted); " +
		"on the H100 alone, cuBLAS's Hopper kernels as larger tiles only (the joint fit run once from the presets, whose own " +
		"objective is then 0.0403 and held-out GEMM 6.1%): without the 64-column tiles 0.0406 and 6.3%, without the 64-row " +
		"tiles above 64 rows 0.0401 and 5.9%, without both 0.0388 and 6.2%; the stream-K candidate and no 64-row tiles above " +
		"64 rows together, with only the GEMM parameters refitted (main loop 0.746, 5,789 cycles a tile, the memory kernels' " +
		"parameters held): held-out 5.4%, the GEMM rows' training objective 0.0648 against 0.0734 refitted without them, " +
		"but every H100 training row of FIDELITY.md, already fast, comes out faster (NeMo's FP8 rows by 1.6-5.5 points, " +
		"LLaMA-2-13B's past 10%): the partial waves stream-K hides are what those steps' large GEMMs pay, so it is not kept"
	normNotes = "The norm (rms_norm, a row kernel): its input read at L2's bandwidth while it fits a quarter of L2, " +
		"less of it beyond, none from twice that (compute's residentStream: the residual add wrote the rows in the order " +
		"the norm reads them, and the norm's own misses evict what it has not reached; keeping the quarter at every size, " +
		"as the kernels after a GEMM do, the held-out A100 median was 6.5%, with least-recently-used replacement's drop " +
		"to none past the quarter 6.0%, its rows just past it 23-35% slow); its second pass at L2's latency " +
		"(L2LatencyS: 5.9% with DRAM's for both passes, the A100's 4,096-wide norms of up to 64 tokens 25% slow); " +
		"its rows in waves of 216 blocks (two per SM), each the longer of its loop and its bytes (compute's rowWaves: " +
		"5.1% as the longer of the whole kernel's chain and bytes, the partial last wave's chain hidden under the full " +
		"waves' bytes, 65-512 tokens 10% fast). Also refitted and " +
		"rejected: the latency chain added to the bandwidth time rather than the larger of the two (A100 norm 25%); " +
		"reading the producer's output from L2 (A100 norm at 65-512 tokens 0%, but above 4,096 tokens +41%); the " +
		"L2-resident input at L2's bandwidth for silu_and_mul too (A100 training objective 0.066 against 0.061, held-out " +
		"elementwise 4.8% against 2.8%); a load-instruction bound never binds; a fixed time per block beside the bytes, " +
		"the round trips before a block streams (silu_and_mul 1, rms_norm 2) at the memory latency, which Llama-3's " +
		"32,768-token rows show (A100: 2.2 and 4.6 ns a token whatever the row's width) but the training split, at most " +
		"4,096 tokens, does not (A100 norm 5.3%, elementwise 5.2%, H100 norm 6.7%, measured before the norm's L2 read); " +
		"silu_and_mul and the norm summing their chains as RoPE does (one and two round trips a block: A100 norm 10.8%, " +
		"H100 norm 17.2%); writes dearer than reads (DRAM's read-to-write turnaround: each streaming kernel's output " +
		"bytes weighted by a fitted factor): at 1.3 A100 norm 6.9% and embedding 4.5% (-9.4% signed above 4,096 " +
		"tokens), at 2 norm 9.1%, elementwise 10.3%. " +
		"Part of the norm's scatter is the layer around it, which no price of a kernel's shape follows: Vidur's profiler " +
		"times each TP degree's whole layer, and the same 8,192-wide rms_norm of 1,024 tokens takes 52 µs at TP 1 and " +
		"36-43 µs at TP 2-8 on A100 (CodeLlama-34B's and Qwen-72B's input norm; H100 at 4,096 tokens 123 against 111 µs), " +
		"where the vectorized residual add of the same rows does not move (27-28 µs); the model prices one time between. " +
		"phi-2's LayerNorm is PyTorch's own kernel (torch.nn.LayerNorm in Vidur's profiler: 128-thread blocks, 4-wide " +
		"loads, compute.ImplRowVector), not rms_norm: priced as such its A100 rows from 768 tokens come within 0-18% " +
		"(+20-30% as rms_norm) and below 512 tokens 29-38% fast (43-50%), the Welford reduction between its two passes " +
		"not priced"
)

// KernelCell is one GPU × class (× range) cell of the report.
type KernelCell struct {
	SKU, Class, Range string
	HeldOut, Train    KernelStat
}

// KernelCells prices every Vidur row on its preset and summarises the
// errors per SKU × class (Range "all") and per SKU × class × range.
func KernelCells(rows []KernelRow) ([]KernelCell, error) {
	skus, by := BySKU(rows)
	var out []KernelCell
	for _, sku := range skus {
		g, err := VidurGPU(sku)
		if err != nil {
			return nil, err
		}
		es, err := PriceRows(g, by[sku])
		if err != nil {
			return nil, err
		}
		for _, c := range KernelClasses {
			for _, rg := range append([]string{"all"}, KernelRanges...) {
				in := func(held bool) func(*KernelRow) bool {
					return func(r *KernelRow) bool {
						return r.Class == c && HeldOut(r.Model) == held && (rg == "all" || KernelRange(r.Tokens) == rg)
					}
				}
				cell := KernelCell{SKU: sku, Class: c, Range: rg,
					HeldOut: Summarize(Filter(es, in(true))), Train: Summarize(Filter(es, in(false)))}
				if cell.HeldOut.N+cell.Train.N > 0 {
					out = append(out, cell)
				}
			}
		}
	}
	return out, nil
}

// CookbookRow is one cookbook GEMM beside its price.
type CookbookRow struct {
	// Sweep names the sweep (or the layer's block); Op is mm, bmm or gemm.
	Sweep, Op            string
	Batch, M, N, K       int64
	MeasuredS, PredS     float64
	KernelS, HostS       float64
	Statistic, Component string
}

// CookbookHostS is the host's share of one timed torch.mm iteration
// (launch, synchronize, Python's time.time): the smallest mm of the sweep
// (32×32×4096, 39 µs measured, a kernel of a few µs) is all but this, so
// it is that row's measurement minus its kernel price. It is added only
// in this comparison, which timed wall-clock, not kernels.
func CookbookHostS(e *compute.Evaluator, rows []CookbookRow) float64 {
	for _, r := range rows {
		if r.Sweep == "mm_m_sweep" && r.M == 32 {
			c, _ := e.Op(model.NewGEMM("mm", hw.FP16, 1, r.M, r.N, r.K))
			return r.MeasuredS - c.TimeS
		}
	}
	return 0
}

// LoadCookbook prices the cookbook's A100 sweeps on the A100 80GB SXM preset
// (the SKU is not recorded). mm: mean wall-clock with a sync per
// iteration = kernel + CookbookHostS; bmm: the maximum iteration, the same
// sum (the maximum's excess over the mean is not modelled).
func LoadCookbook(dir string) ([]CookbookRow, error) {
	rows, e, err := cookbookGEMMs(filepath.Join(dir, "cookbook_a100_gemm_sweeps.csv"), "sweep", "time_ms_derived")
	if err != nil {
		return nil, err
	}
	host := CookbookHostS(e, rows)
	for i := range rows {
		rows[i].HostS = host
		rows[i].PredS = rows[i].KernelS + host
	}
	return rows, nil
}

// cookbookGEMMs reads a cookbook table's mm, bmm and gemm rows (label
// column, measured milliseconds in msCol) and prices each GEMM's kernel on
// the A100 80GB SXM preset, the evaluator it used beside them.
func cookbookGEMMs(path, label, msCol string) ([]CookbookRow, *compute.Evaluator, error) {
	recs, err := readCSV(path)
	if err != nil {
		return nil, nil, err
	}
	g, err := VidurGPU("a100")
	if err != nil {
		return nil, nil, err
	}
	e := compute.NewEvaluator(g)
	var rows []CookbookRow
	for _, r := range recs {
		if op := r["op"]; op != "mm" && op != "bmm" && op != "gemm" {
			continue
		}
		ms, err := strconv.ParseFloat(r[msCol], 64)
		if err != nil {
			return nil, nil, fmt.Errorf("cookbook %s: %s %q: %w", r[label], msCol, r[msCol], err)
		}
		row := CookbookRow{Sweep: r[label], Op: r["op"], Batch: atoi(r["batch"]), M: atoi(r["m"]), N: atoi(r["n"]), K: atoi(r["k"]), MeasuredS: ms * 1e-3}
		if row.KernelS, err = cookbookKernelS(e, row); err != nil {
			return nil, nil, err
		}
		rows = append(rows, row)
	}
	return rows, e, nil
}

// cookbookKernelS is a cookbook GEMM's kernel time on e (fp16).
func cookbookKernelS(e *compute.Evaluator, r CookbookRow) (float64, error) {
	c, err := e.Op(model.NewGEMM(r.Op, hw.FP16, r.Batch, r.M, r.N, r.K))
	return c.TimeS, err
}

// DenseGEMMReport is KERNELS.md's section on Vidur's dense GEMM sweep:
// Llama-2-7B's and -70B's four GEMMs at every token count Vidur profiled,
// priced on the presets, split by whether vidur_compute_ops.csv (rows)
// samples that token count for the model (the fit saw the training
// models only there) or not (between the samples, never seen).
func DenseGEMMReport(rows, dense []KernelRow) (string, error) {
	type key struct{ gpu, model string }
	sampled := map[key]map[int64]bool{}
	for _, r := range rows {
		k := key{r.GPU, r.Model}
		if sampled[k] == nil {
			sampled[k] = map[int64]bool{}
		}
		sampled[k][r.Tokens] = true
	}
	skus, by := BySKU(dense)
	var b strings.Builder
	var totals []string
	var worst KernelStat
	var worstName string
	b.WriteString("\n## Between the sampled token counts: Vidur's dense GEMM sweep\n\n")
	b.WriteString("`vidur_gemm_dense_llama2.csv` holds Llama-2-7B's and Llama-2-70B's four GEMMs at every token count Vidur profiled " +
		"(1, 2, 4, then steps of 8 to 1,016, of 16 to 2,048 and of 32 to 4,096: 259), where the tables above keep 30. Both models are in " +
		"the fit's training split, but only at those 30 counts: the other 229 are shapes the fit never saw, each a tile and wave count " +
		"of its own, priced by the same parameters (timed as Vidur's timer records, as above).\n\n")
	b.WriteString("| GPU | model | tokens | rows at the sampled counts | median \\|err\\| | rows between them | median \\|err\\| | p90 \\|err\\| | median signed |\n|---|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, sku := range skus {
		g, err := VidurGPU(sku)
		if err != nil {
			return "", err
		}
		es, err := PriceRows(g, by[sku])
		if err != nil {
			return "", err
		}
		var models []string
		for _, e := range es {
			if !slices.Contains(models, e.Row.Model) {
				models = append(models, e.Row.Model)
			}
		}
		sort.Strings(models)
		atAll := Summarize(Filter(es, func(r *KernelRow) bool { return sampled[key{sku, r.Model}][r.Tokens] }))
		betweenAll := Summarize(Filter(es, func(r *KernelRow) bool { return !sampled[key{sku, r.Model}][r.Tokens] }))
		totals = append(totals, fmt.Sprintf("%s %s at the sampled counts and %s between them", sku, pct(atAll.Median), pct(betweenAll.Median)))
		for _, m := range models {
			for _, rg := range KernelRanges[:3] {
				in := func(seen bool) []KernelErr {
					return Filter(es, func(r *KernelRow) bool {
						return r.Model == m && KernelRange(r.Tokens) == rg && sampled[key{sku, m}][r.Tokens] == seen
					})
				}
				at, between := Summarize(in(true)), Summarize(in(false))
				if between.Median > worst.Median {
					worst, worstName = between, fmt.Sprintf("%s's %s at %s tokens", sku, strings.TrimPrefix(m, "meta-llama/"), rg)
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %d | %s | %d | %s | %s | %s |\n", sku, strings.TrimPrefix(m, "meta-llama/"), rg,
					at.N, pct(at.Median), between.N, pct(between.Median), pct(between.P90), signedPct(between.Bias))
			}
		}
	}
	fmt.Fprintf(&b, "\nMedian |error| over both models: %s (few of the counts between the samples are 64 tokens or fewer, where "+
		"the errors are smallest). Range by range, the token counts the fit never saw read as the ones it did: the tile and wave "+
		"model carries the GEMMs' steps between the samples, and what misses, misses at the sampled counts too (the worst cell, "+
		"%s, %s in the median, %s signed: cuBLAS's choice of kernel, as the H100 note above describes).\n",
		strings.Join(totals, "; "), worstName, pct(worst.Median), signedPct(worst.Bias))
	return b.String(), nil
}

// LoadCookbookLayer prices the GEMM and bmm blocks of the cookbook's GPT
// layer sample (hidden 4,096, 16 heads, micro-batch 4, sequence 2,048,
// fp16; each block benchmarked alone between CUDA events, the maximum over
// the timed iterations) on the A100 80GB SXM preset: kernel time, no host
// term. Their times are the ones derived from the printed TFLOP/s (the
// printed seconds have 0.1 ms resolution). The other blocks (torch's
// unfused fp32 softmax, dropout, the TorchScript bias-GeLU and
// bias-dropout-add, LayerNorm) are left out: 0.1–1.2 ms printed to
// 0.1 ms, and kernels other than the ones Eidolon's builder prices.
func LoadCookbookLayer(dir string) ([]CookbookRow, error) {
	rows, _, err := cookbookGEMMs(filepath.Join(dir, "cookbook_transformer_layer_sample.csv"), "block", "time_ms_derived_from_tflops")
	for i := range rows {
		rows[i].Statistic, rows[i].PredS = "max", rows[i].KernelS
	}
	return rows, err
}

// KernelReport renders KERNELS.md.
func KernelReport(rows, dense []KernelRow, cook, layer []CookbookRow) (string, error) {
	cells, err := KernelCells(rows)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("# Kernel fidelity: core/compute against measured kernel times\n\n")
	b.WriteString("Generated by `go test ./bench/fidelity -run KernelReport -update`; a test fails when this file is stale.\n\n")
	b.WriteString("Every Vidur row (`../shared/reference/kernels/vidur_compute_ops.csv`: CUPTI kernel times, fp16 forward, " +
		"median of 20 invocations) is built as Eidolon's model builds the operator and priced by `compute.Evaluator` on the " +
		"`a100-80gb-sxm` or `h100-sxm` preset. Vidur's timer records each kernel in whole microseconds, truncated " +
		"(PyTorch's `KinetoEvent::durationUs`, nanoseconds / 1000 in integer arithmetic; every median in the table is a " +
		"multiple of 0.5 µs), so a kernel of 2.9 µs reads 2 µs: the model's time is compared as that timer would record it, " +
		"each kernel truncated to the microsecond, and Error = timed prediction / measured − 1 (the simulator itself uses the " +
		"untruncated time). **Held-out**: CodeLlama-34B, Llama-3-8B, " +
		"Llama-3-70B, phi-2 (the parameters never saw them); **train**: Qwen-72B, InternLM-20B, Llama-2-7B, Llama-2-70B. " +
		"H100 has no Llama-3 tables, so its held-out split is CodeLlama-34B and phi-2.\n\n")
	b.WriteString("Mechanism: GEMMs are waves of CTA tiles, each tile its K-steps at the main loop's MMA rate plus a fixed " +
		"prologue/epilogue, overlapped with its shared-memory, L2 and HBM traffic (the fastest tile of the candidate set; " +
		"a split-K candidate runs cuBLAS's second kernel, splitKreduce_kernel, which reads the slices' fp32 partials and " +
		"writes the output: before it was priced, split 8 and 16 came out 11-15% fast on both GPUs and the held-out GEMM " +
		"medians were 5.1% (A100) and 6.9% (H100)); " +
		"streaming kernels are bytes over the bandwidth of their implementation (vectorized, row kernel, gather), row kernels " +
		"also a latency chain (loop iterations × memory latency per wave of resident rows: the norm's second pass, which " +
		"reads its row from L1 and its weight from L2, at L2's latency, L2LatencyS, fitted alone on the training " +
		"split's norm rows with the others held, after them: FitL2Latency, TestL2LatencyFitIsOptimal; with DRAM's " +
		"latency for both passes the A100's 4,096-wide norms of up to 64 tokens read 25% slow, its 8,192-wide ones on " +
		"the line, and the held-out norm median was 5.9%; a norm's waves each the longer of their loop and their bytes, " +
		"so that a last, partial wave waits its whole chain); the input the previous kernel " +
		"wrote is read from L2 up to a quarter of it (vectorized kernels, and the norm's read-only first pass at L2's " +
		"bandwidth, the norm's input, written by the add before it in the order the norm reads it, fading to none at " +
		"half of L2: before, the A100 norms of 65-512 tokens came out 20% slow and the held-out norm medians were 8.4% " +
		"(A100) and 4.5% (H100)); RoPE as its launch code runs it (a block per token of min(query heads × 64, 512) " +
		"threads rotating a pair per iteration, first the query heads' pairs, then the key heads', so that with one key " +
		"head a rank most of a 512-thread block idles through the second loop), the chain of those iterations added " +
		"to its bytes' time (each iteration's in-place stores precede the next one's loads), its input read from L2 " +
		"up to a quarter of it as the add's, the rest at its own bandwidth (RotaryBandwidthFraction, fitted alone on " +
		"the training split's RoPE rows with the others held: FitRotary, TestRotaryFitIsOptimal; fitted jointly with " +
		"them, before the L2 read, it moved the GEMM parameters to another basin of the stepped loss, which put Korthikanti's Table 4 backward at " +
		"+6.4 %): before, with the row kernels' geometry and bandwidth, the held-out RoPE medians were 8.3% on both " +
		"GPUs, GQA models' TP 8 rows (one key head a rank) 8-23% fast and MHA models' 7-22% slow at 1,024-4,096 " +
		"tokens on A100; gathers two dependent latencies " +
		"(the id, then its row) before their bytes stream, up to 16 ids two latencies per id (index_select's small-index " +
		"kernel; taking the larger of the chain and the bytes' time instead of their sum left H100's 24-160-token gathers " +
		"0.5-1 µs short, held-out median 5.6%); every kernel pays a fixed " +
		"device time. Parameters per GPU (hw presets, fitted with `go test ./bench/fidelity -run KernelFit -fit -v`, " +
		"then L2LatencyS with `-run TestL2LatencyFitIsOptimal` and RotaryBandwidthFraction with `-run TestRotaryFitIsOptimal`):\n\n")
	b.WriteString("| GPU |")
	for _, n := range KernelParamNames {
		b.WriteString(" " + n + " |")
	}
	b.WriteString(" L2LatencyS | RotaryBandwidthFraction |")
	b.WriteString("\n|---|" + strings.Repeat("---:|", len(KernelParamNames)+2) + "\n")
	skus, _ := BySKU(rows)
	for _, sku := range skus {
		g, _ := VidurGPU(sku)
		p := ParamsOf(g)
		fmt.Fprintf(&b, "| %s |", g.Name)
		for _, v := range p {
			fmt.Fprintf(&b, " %.4g |", v)
		}
		fmt.Fprintf(&b, " %.4g | %.4g |", g.L2LatencyS, g.RotaryBandwidthFraction)
		b.WriteString("\n")
	}

	b.WriteString("\nRerun from the presets, the joint fit returns the A100's within its steps (2,818 against 2,815 cycles a tile). " +
		"The H100's it does not: its loss on Vidur's H100 tables falls along a long, shallow valley in which a larger fixed " +
		"cost per tile trades against a faster main loop. Each run moves the presets along it (5,741, then 5,889, 5,938 " +
		"cycles a tile) until, run again from its own result, it stays within its steps at 6,038-6,058 cycles a tile and a " +
		"tensor efficiency of 0.817 (training objective 0.0401 against the presets' 0.0437; L2LatencyS then refits to " +
		"305 ns and the FlashAttention backward's lane work to 28). There the held-out H100 medians read 5.9 % (GEMM), " +
		"0.0, 3.0, 3.4 and 2.6 % (norm, elementwise, RoPE, embedding) against 6.2, 0.0, 3.6, 4.4 and 3.6 %, but the " +
		"checks that no fit sees move the other way and two fail: the FlashAttention forward against cuDNN's on H100 " +
		"(FlashAttention-3 paper) reads -17.7 % (-22.0 % causal) at 512 tokens, beyond its 15 % (-11.8 and -13.3 % with " +
		"the presets), and Transformer Engine's GEMM benchmark on an H200 NVL, priced with the H100's parameters, " +
		"-12.6 % on its worst row against its 10 % (BF16 -4.8 to -6.8 % against -1.6 to -3.2 %); the H100 end-to-end " +
		"rows move 1-3.5 points faster, most of them further from their references (Llama 3.1 405B on 8,192 GPUs " +
		"+17.4 to +20.9 %, the NeMo FP8 rows 1-2.4 points, the GPT TP 8 rows 1-3 points nearer). Vidur's tables alone " +
		"do not fix where on the valley the H100 sits; the presets stay at its start, the point from which the " +
		"independent kernel checks above hold, and that choice, not the command, sets them: a known gap between the " +
		"H100 presets and the command that fits them.\n")
	b.WriteString("\n## Summary: held-out split per GPU and op class\n\n")
	b.WriteString("| GPU | class | rows | median \\|err\\| | p90 \\|err\\| | median signed | train median \\|err\\| | ≤ 5 % |\n|---|---|---:|---:|---:|---:|---:|---|\n")
	type worst struct {
		name string
		v    float64
	}
	var wc, wr worst
	for _, c := range cells {
		if c.Range != "all" {
			if c.HeldOut.N >= 5 && c.HeldOut.Median > wr.v {
				wr = worst{fmt.Sprintf("%s %s tokens %s (median %s over %d rows)", c.SKU, c.Class, c.Range, pct(c.HeldOut.Median), c.HeldOut.N), c.HeldOut.Median}
			}
			continue
		}
		ok := "yes"
		if c.HeldOut.Median > 0.05 {
			ok = "**no**"
		}
		if c.HeldOut.Median > wc.v {
			wc = worst{fmt.Sprintf("%s %s (median %s)", c.SKU, c.Class, pct(c.HeldOut.Median)), c.HeldOut.Median}
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s | %s |\n", c.SKU, c.Class, c.HeldOut.N, pct(c.HeldOut.Median),
			pct(c.HeldOut.P90), signedPct(c.HeldOut.Bias), pct(c.Train.Median), ok)
	}
	fmt.Fprintf(&b, "\nWorst class: %s. Worst class × token range: %s.\n", wc.name, wr.name)
	b.WriteString("\nCells above 5 % are skipped by name in `TestKernelHeldOutError`, with what the mechanism lacks:\n\n")
	for _, c := range cells {
		if why, ok := KernelCheckPending[c.SKU+"/"+c.Class]; ok && c.Range == "all" && c.HeldOut.Median > 0.05 {
			fmt.Fprintf(&b, "- %s %s (%s): %s.\n", c.SKU, c.Class, pct(c.HeldOut.Median), why)
		}
	}
	b.WriteString("\n" + normNotes + ".\n")

	b.WriteString("\nWhat no shape-monotone mechanism can follow: the measured GEMMs that take more than 10 % longer than the " +
		"same GEMM (model, TP, operator) at a larger token count, cuBLAS's heuristic picking a worse kernel for the smaller " +
		"problem (H100 GEMMs of 160-192 tokens often run 15-40 % slower than at 256):")
	for _, sku := range skus {
		slower, n := nonMonotoneGEMMs(rows, sku, 0.10)
		fmt.Fprintf(&b, " %s %d of %d rows (%s);", sku, slower, n, pct(float64(slower)/float64(n)))
	}
	b.WriteString(" the model's time never falls as tokens grow.\n")
	if err := writeByTP(&b, rows); err != nil {
		return "", err
	}
	if err := writeRowParallel(&b, rows); err != nil {
		return "", err
	}

	b.WriteString("\n## Held-out split per GPU and operator\n\n")
	b.WriteString("| GPU | op | class | rows | median \\|err\\| | p90 \\|err\\| | median signed |\n|---|---|---|---:|---:|---:|---:|\n")
	skusOp, byOp := BySKU(rows)
	for _, sku := range skusOp {
		g, _ := VidurGPU(sku)
		es, err := PriceRows(g, byOp[sku])
		if err != nil {
			return "", err
		}
		var ops []string
		class := map[string]string{}
		for _, e := range es {
			if _, ok := class[e.Row.Op]; !ok {
				ops = append(ops, e.Row.Op)
				class[e.Row.Op] = e.Row.Class
			}
		}
		sort.Strings(ops)
		for _, op := range ops {
			st := Summarize(Filter(es, func(r *KernelRow) bool { return r.Op == op && HeldOut(r.Model) }))
			fmt.Fprintf(&b, "| %s | %s | %s | %d | %s | %s | %s |\n", sku, op, class[op], st.N, pct(st.Median), pct(st.P90), signedPct(st.Bias))
		}
	}

	b.WriteString("\n## Per GPU × class × token range\n\n")
	b.WriteString("| GPU | class | tokens | held-out rows | median \\|err\\| | p90 \\|err\\| | median signed | train rows | train median \\|err\\| | train p90 |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range cells {
		if c.Range == "all" {
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %s | %s | %s | %d | %s | %s |\n", c.SKU, c.Class, c.Range, c.HeldOut.N,
			pct(c.HeldOut.Median), pct(c.HeldOut.P90), signedPct(c.HeldOut.Bias), c.Train.N, pct(c.Train.Median), pct(c.Train.P90))
	}

	if len(cook) > 0 {
		b.WriteString("\n## EleutherAI cookbook sweeps (A100, not used in the fit)\n\n")
		fmt.Fprintf(&b, "Host wall-clock per iteration with a synchronize (mm: the mean; bmm: the maximum), so each price is the kernel "+
			"plus a host term of %.1f µs (the smallest mm's measurement minus its kernel price; stated, not fitted to the sweep).\n\n", 1e6*cook[0].HostS)
		b.WriteString("| sweep | statistic | rows | median \\|err\\| | p90 \\|err\\| | median signed | largest shape: measured / predicted TFLOP/s |\n|---|---|---:|---:|---:|---:|---|\n")
		// A sweep with shapes of both kinds is split by alignment: a
		// dimension that is no multiple of 8 fp16 elements (16 bytes)
		// rules out cuBLAS's 16-byte-load kernels (below).
		mixed := map[string][2]bool{}
		for _, r := range cook {
			m := mixed[r.Sweep]
			m[boolIndex(aligned16(r))] = true
			mixed[r.Sweep] = m
		}
		var order []string
		groups := map[string][]CookbookRow{}
		var misaligned, heldMisaligned, alignedPart string
		for _, r := range cook {
			name := r.Sweep
			if m := mixed[r.Sweep]; m[0] && m[1] {
				if aligned16(r) {
					name += ", every dimension a multiple of 8"
					alignedPart = name
				} else if UnalignedFit(r) {
					name += ", a dimension not a multiple of 8, fitted (n ≡ 4 mod 8)"
					misaligned = name
				} else {
					name += ", a dimension not a multiple of 8, held out (n ≡ 2, 6 mod 8)"
					heldMisaligned = name
				}
			}
			if _, ok := groups[name]; !ok {
				order = append(order, name)
			}
			groups[name] = append(groups[name], r)
		}
		for _, s := range order {
			var abs, sig []float64
			var big CookbookRow
			for _, r := range groups[s] {
				e := r.PredS/r.MeasuredS - 1
				abs = append(abs, absf(e))
				sig = append(sig, e)
				if fl(r) > fl(big) {
					big = r
				}
			}
			stat := "mean"
			if strings.HasPrefix(s, "bmm") {
				stat = "max"
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %d×%d×%d×%d: %.0f / %.0f |\n", s, stat, len(abs), pct(Quantile(abs, 0.5)),
				pct(Quantile(abs, 0.9)), signedPct(Quantile(sig, 0.5)), big.Batch, big.M, big.N, big.K, fl(big)/big.MeasuredS/1e12, fl(big)/big.PredS/1e12)
		}
		if misaligned != "" {
			a100, err := VidurGPU("a100")
			if err != nil {
				return "", err
			}
			unalignedFraction := a100.UnalignedMMAFraction
			fmt.Fprintf(&b, "\nAlignment (%s and %s, against %s): NVIDIA's matrix-multiplication guide asks for "+
				"dimensions in multiples of 16 bytes (8 fp16 elements) for the most efficient Tensor Core kernels, and cuBLAS runs other "+
				"shapes with narrower loads. The narrow sweep (27,648 × n × 4,096) steps up at every n that is no multiple of 8: priced as "+
				"the aligned kernels run, its unaligned rows read 25 %% fast. The model runs a GEMM whose K or N rows are no multiple of "+
				"16 bytes at a main-loop rate of its own, hw.GPU.UnalignedMMAFraction, fitted alone on the rows n ≡ 4 mod 8 (8-byte "+
				"rows; FitUnaligned, TestUnalignedFitIsOptimal: %.2f of the aligned rate on the A100, which the other NVIDIA presets "+
				"take, derived) and checked on n ≡ 2 or 6 mod 8 (4-byte rows). All of Vidur's shapes are aligned (the tokens are no "+
				"operand's row), and so are the presets' hidden, head, expert and vocabulary sizes, but not every Hugging Face config's: "+
				"GPT-2's vocabulary of 50,257 is one, which nanoGPT pads to 50,304 and Megatron-LM to a multiple of 128 times the TP "+
				"degree (--make-vocab-size-divisible-by, as the training kind does by default).\n", misaligned, heldMisaligned, alignedPart, unalignedFraction)
		}
	}
	if len(layer) > 0 {
		b.WriteString("\nThe cookbook's sample GPT layer (hidden 4,096, 16 heads, micro-batch 4, sequence 2,048, fp16; the GPU is not " +
			"stated, its GEMM rates are an A100's): each block alone between CUDA events, the maximum over the timed iterations, so " +
			"kernel time, priced without a host term. Its GEMM and bmm blocks:\n\n")
		b.WriteString("| block | batch × m × n × k | measured ms | predicted ms | error | measured / predicted TFLOP/s |\n|---|---|---:|---:|---:|---|\n")
		for _, r := range layer {
			fmt.Fprintf(&b, "| %s | %d×%d×%d×%d | %.3f | %.3f | %s | %.0f / %.0f |\n", r.Sweep, r.Batch, r.M, r.N, r.K, 1e3*r.MeasuredS,
				1e3*r.PredS, signedPct(r.PredS/r.MeasuredS-1), fl(r)/r.MeasuredS/1e12, fl(r)/r.PredS/1e12)
		}
		long := 0.0
		for _, r := range layer {
			if r.K >= 2048 {
				long = max(long, absf(r.PredS/r.MeasuredS-1))
			}
		}
		fmt.Fprintf(&b, "\nThe blocks with a long reduction (k ≥ 2,048) come within %s. The attention scores, 64 "+
			"products with k = 256 (the head dimension), run slower than priced: each tile's main loop is 4 K-steps of 64 against a "+
			"fixed prologue and epilogue fitted on Vidur's GEMMs, whose shortest reduction is 512 wide (the attention output "+
			"projection at TP 8).", pct(long))
		b.WriteString(" The softmax (torch's fp32 path: cast, scale, mask, softmax, cast back, " +
			"7.6 ms), dropout, the fused bias-GeLU and bias-dropout-add and the LayerNorm are not compared: printed to 0.1 ms, and " +
			"run as kernels Eidolon's builder does not emit.\n")
	}
	dg, err := DenseGEMMReport(rows, dense)
	if err != nil {
		return "", err
	}
	b.WriteString(dg)
	h100, ok := hw.GPUByName("h100-sxm")
	if !ok {
		return "", fmt.Errorf("kernels: no h100-sxm preset")
	}
	att, err := AttentionReport(h100)
	if err != nil {
		return "", err
	}
	b.WriteString(att)
	ds, _, err := DeepSeekGEMMReport()
	if err != nil {
		return "", err
	}
	b.WriteString(ds)
	te, _, err := TEGEMMReport()
	if err != nil {
		return "", err
	}
	b.WriteString(te)
	mamf, err := MAMFReport()
	if err != nil {
		return "", err
	}
	b.WriteString(mamf)
	cal, err := CalibrateReport(rows)
	if err != nil {
		return "", err
	}
	b.WriteString(cal)
	return b.String(), nil
}

func fl(r CookbookRow) float64 { return 2 * float64(r.Batch*r.M*r.N) * float64(r.K) }

func absf(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// nonMonotoneGEMMs counts sku's GEMM rows whose measured time exceeds by
// more than tol that of the same GEMM (model, TP, operator) at some larger
// token count, and the GEMM rows.
func nonMonotoneGEMMs(rows []KernelRow, sku string, tol float64) (slower, n int) {
	type gemm struct {
		model, op string
		tp        int64
	}
	by := map[gemm][]*KernelRow{}
	for i := range rows {
		if r := &rows[i]; r.GPU == sku && r.Class == "gemm" {
			k := gemm{r.Model, r.Op, r.TP}
			by[k] = append(by[k], r)
		}
	}
	for _, rs := range by {
		for _, r := range rs {
			n++
			for _, q := range rs {
				if q.Tokens > r.Tokens && r.MeasuredS > (1+tol)*q.MeasuredS {
					slower++
					break
				}
			}
		}
	}
	return slower, n
}

// pricedBySKU prices each Vidur SKU's rows that keep accepts (nil: all) on
// its GPU, the SKUs in BySKU's order.
func pricedBySKU(rows []KernelRow, keep func(*KernelRow) bool) ([]string, map[string][]KernelErr, error) {
	skus, by := BySKU(rows)
	priced := map[string][]KernelErr{}
	for _, sku := range skus {
		g, err := VidurGPU(sku)
		if err != nil {
			return nil, nil, err
		}
		var picked []*KernelRow
		for _, r := range by[sku] {
			if keep == nil || keep(r) {
				picked = append(picked, r)
			}
		}
		if priced[sku], err = PriceRows(g, picked); err != nil {
			return nil, nil, err
		}
	}
	return skus, priced, nil
}

// byTPOps are the operators whose shape does not depend on the TP degree
// (the hidden size is not split), then the residual add, GEMMs for
// comparison.
var byTPOps = []string{"input_layernorm", "post_attention_layernorm", "emb", "add", "mlp_up_proj", "mlp_down_proj"}

// writeByTP writes each GPU's median signed error by TP degree at
// 513-4,096 tokens, every model and split, for byTPOps.
func writeByTP(b *strings.Builder, rows []KernelRow) error {
	b.WriteString("\nThe same kernel, the same shape, by TP degree: Vidur's profiler builds each TP degree's layer on one " +
		"GPU (its weights sharded, no communication), so the norms, the embedding and the residual add time the same rows " +
		"of the hidden size at every degree. Median signed error (timed prediction / measured − 1) at 513-4,096 tokens, " +
		"every model:\n\n| GPU | op | TP 1 | TP 2 | TP 4 | TP 8 |\n|---|---|---:|---:|---:|---:|\n")
	skus, priced, err := pricedBySKU(rows, nil)
	if err != nil {
		return err
	}
	for _, sku := range skus {
		es := priced[sku]
		for _, op := range byTPOps {
			fmt.Fprintf(b, "| %s | %s |", sku, op)
			for _, tp := range []int64{1, 2, 4, 8} {
				st := Summarize(Filter(es, func(r *KernelRow) bool {
					return r.Op == op && r.TP == tp && KernelRange(r.Tokens) == "513-4096"
				}))
				fmt.Fprintf(b, " %s |", signedPct(st.Bias))
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("\nThe norms and the embedding gather measure slower at TP 1 than the same rows at TP 8 (the model prices " +
		"one time between), the vectorized residual add, bound by HBM alone, does not move, and the GEMMs, whose shapes do " +
		"change, drift the same way. What differs between the degrees is the layer around the kernel, not the kernel: at " +
		"TP 1 the layer's GEMMs are eight times larger, and one explanation the rows allow is a GPU held at its power " +
		"limit under them running lower clocks, which the L2- and latency-bound parts of a norm and a GEMM's math feel " +
		"and DRAM does not (no clock is recorded with the tables); the embedding's ids, drawn from the rank's shard of " +
		"the vocabulary (vidur/profiling/mlp/mlp_wrapper.py), range over a table eight times smaller at TP 8. Neither is " +
		"a shape the model can price; sustained runs (training, large batches) are the TP 1 case.\n")
	return nil
}

// aligned16 says whether every dimension of a cookbook GEMM is a multiple
// of 8 elements (16 bytes in fp16).
func aligned16(r CookbookRow) bool { return r.M%8 == 0 && r.N%8 == 0 && r.K%8 == 0 }

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

// rowParallelN is the output width of the row-parallel GEMMs compared by
// writeRowParallel: the 8,192-wide models' (CodeLlama-34B, Llama-2-70B,
// Llama-3-70B, Qwen-72B), whose output projection and down projection
// have the same M and N at every TP degree and K from 1,024 to 28,672.
const rowParallelN = 8192

// writeRowParallel writes, per GPU, the measured rate and the error of the
// two row-parallel GEMMs of the 8,192-wide models at 4,096 tokens, by K
// (the median over the models of that K): one M and N, so what moves
// between rows is K alone, or what is not a shape.
func writeRowParallel(b *strings.Builder, rows []KernelRow) error {
	b.WriteString("\nThe same M and N, two operators: the 8,192-wide models' row-parallel GEMMs at 4,096 tokens " +
		"(4,096 × 8,192 outputs; the output projection's K is 8,192 / TP, the down projection's the MLP width / TP). " +
		"Measured TFLOP/s and error, the median over the models of each K:\n\n" +
		"| GPU | op | K | models | measured µs | measured TFLOP/s | error |\n|---|---|---:|---:|---:|---:|---:|\n")
	skus, priced, err := pricedBySKU(rows, func(r *KernelRow) bool {
		return r.Tokens == 4096 && r.N == rowParallelN && (r.Op == "attn_post_proj" || r.Op == "mlp_down_proj")
	})
	if err != nil {
		return err
	}
	for _, sku := range skus {
		es := priced[sku]
		type key struct {
			op string
			k  int64
		}
		var keys []key
		group := map[key][]KernelErr{}
		for _, e := range es {
			k := key{e.Row.Op, e.Row.K}
			if _, ok := group[k]; !ok {
				keys = append(keys, k)
			}
			group[k] = append(group[k], e)
		}
		slices.SortFunc(keys, func(x, y key) int {
			if c := strings.Compare(x.op, y.op); c != 0 {
				return c
			}
			return int(x.k - y.k)
		})
		for _, k := range keys {
			g := group[k]
			us := make([]float64, len(g))
			for i, e := range g {
				us[i] = e.Row.MeasuredS
			}
			m := Quantile(us, 0.5)
			flops := 2 * 4096 * float64(rowParallelN) * float64(k.k)
			fmt.Fprintf(b, "| %s | %s | %d | %d | %.1f | %.0f | %s |\n", sku, k.op, k.k, len(g), m*1e6, flops/m/1e12, signedPct(Summarize(g).Bias))
		}
	}
	b.WriteString("\nOn A100 the two operators run at 190-241 TFLOP/s (medians), the output projection's K of 2,048 " +
		"the slowest. On H100 the down projection runs at 727-869 TFLOP/s and the output projection at 691-731: " +
		"at K of 2,048 and 2,752, kernels of 199 and 212 µs, 26 % apart, where the A100's differ by 15 %; the " +
		"model, one price of the shape, reads the H100's down projection slow from TP 4 on (K ≤ 7,168, the error " +
		"column). Two causes the rows allow, neither a shape: cuBLAS's kernel choice per K, and the operands' " +
		"values. The down projection reads the gated activation's output, the output projection the attention's, " +
		"and a GPU at its power limit runs a GEMM at a clock its operands' switching sets (Horace He, \"Strangely, " +
		"Matrix Multiplications on GPUs Run Faster When Given 'Predictable' Data!\", thonking.ai, 2024: an 8,192³ " +
		"bf16 GEMM on A100 at 295 TFLOP/s on zeros and 257 on normal values; \"matmuls on the H100 are primarily " +
		"not compute or bandwidth limited, they are power limited\"). No clock is recorded with the tables; the " +
		"H100 GEMM cell's median above carries this scatter.\n\n" +
		"What the operands are follows from Vidur's profiler: its weights are sarathi's dummy ones, uniform in " +
		"±1e-3 (initialize_dummy_weights), so after the RMSNorm (rows of RMS 1 times a weight of RMS 5.8e-4) the " +
		"gated MLP's up projection outputs values of RMS 2-3e-5, and silu(gate)·up, about 5e-10, rounds to zero in " +
		"fp16 (whose smallest subnormal is 6e-8): the gated models' down projection multiplies zeros, where the " +
		"output projection multiplies torch.randn and the other GEMMs normed activations of RMS 5.8e-4. phi-2's " +
		"GELU MLP, with biases, keeps its activations near 3e-4, and its down projection is no faster than its up " +
		"projection (669 against 737 TFLOP/s, medians over 2,048-4,096 tokens on H100), where the gated models' " +
		"run faster than their up projections in 18 of 20 model and TP pairs. Fitted with " +
		"the other parameters (probes in bench/fidelity, removed) and not kept: a main-loop rate of its own for " +
		"those quiet GEMMs fits 1.09-1.11 times the others' on H100 and 1.01-1.05 on A100, held-out GEMM medians " +
		"6.2-6.6 % and 4.9-5.2 %; a clock that falls from boost towards a sustained fraction s as a tensor-core " +
		"kernel runs, s + (1-s)·τ/T·(1-e^(-T/τ)) for a kernel of T at boost, fits s 0.81-0.89 and τ 80-185 µs on " +
		"H100 (training objective 0.0379-0.0401 against the presets' 0.0404; held-out GEMMs 5.3-5.8 %, 5.3-5.6 % " +
		"with Hopper's persistent kernels) and s 0.83-0.92 on A100 (0.0467-0.0481 against 0.0510; 4.8-4.9 %), but " +
		"it prices short kernels at the boost clock, which the benchmark loops that measure them do not run: built " +
		"into compute for every tensor-core kernel, with the quiet GEMMs at boost, the A100's fit returned s = 1 " +
		"and the H100's (s 0.868, τ 100 µs, main loop 0.885, 5,939 cycles a tile; 5.9 %) put the FlashAttention-3 " +
		"paper's forward at 512-2,048 tokens 19-23 % fast, its backward 12-14 % off FlashAttention-3's and two of " +
		"DeepSeek's profiled GEMMs 11-13 % off, each beyond its check; with the clock set by the profiler's duty " +
		"instead (each kernel T of T + h busy, power ∝ clock³, so clock = min(boost, sustained·duty^(-1/3)); h " +
		"55-72 µs), which leaves the simulator every kernel at the sustained clock, the fit lowers the sustained " +
		"main loop (H100 0.743, A100 0.747) for held-out medians of 5.7-5.9 % and 4.8 %, and Korthikanti's Table 4 " +
		"layers, measured in training, read 3-5 points slower (the baseline backward +8.5 %). What clock a real " +
		"step's kernels hold depends on how busy the GPU has been, which a price per kernel does not see. The " +
		"cookbook's batched GEMMs (below) put the A100's own time constant nearer 10 ms than 100 µs: 4,096³ " +
		"products run at 249-255 TFLOP/s in calls of 0.55-8.7 ms (batch 1-16) and at 209 in calls of 21 and 42 ms " +
		"(batch 32 and 64), where the model prices 226-238; no GEMM of a training step or a Vidur table " +
		"runs that long.\n")
	return nil
}
