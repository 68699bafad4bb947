package hw

// Units used to write the vendors' figures as they are published, converted
// once here: datasheets use decimal prefixes for rates and for HBM capacity
// (80 GB = 80e9 bytes), binary prefixes for on-chip SRAM (a "40 MB" L2 is
// 40 MiB, a "228 KB" shared memory is 228 KiB).
const (
	giga = 1e9
	tera = 1e12
	kib  = 1 << 10
	mib  = 1 << 20

	gbitPerS = 1e9 / 8 // one Gb/s in bytes/s
)

// launchS is the device-side cost of one kernel, about 4 µs: CUDA/HIP launch
// latency microbenchmarks on datacenter parts measure 2–5 µs per back-to-back
// launch. Estimate, shared by all presets (no vendor publishes it).
// The A100 and H100 presets (and those derived from them) use their fitted
// device time per kernel instead (a100Fit, h100Fit: about 2 µs, the time
// Vidur's tables give a residual add of one token).
const launchS = 4e-6

// Measured matmul efficiency, the best large BF16 matmul's throughput over
// the dense peak: S. Bekman, "Machine Learning Engineering", chapter
// compute/accelerator, "Maximum Achievable Matmul FLOPS comparison table"
// (torch matmul, mean of 100 iterations after 50 warm-up, best shape of a
// sweep): A100 SXM 271.2 of 312 TFLOPS, A100 PCIe 252.9 of 312, H100 SXM
// 794.5 of 989 ("H200 is the same"), B200 SXM 1,745 of 2,250, MI300X 668.4
// (PYTORCH_TUNABLEOP_ENABLED=1). Each is divided by the preset's own dense
// peak, so that the main loop runs at the measured rate (the table rounds
// the MI300X's 1,307.4 TFLOPS to 1,300).
// mamfH100PCIe is the H100 PCIe's: a 350 W part that cannot hold its boost
// clock under a large matmul, so it does not share the SXM's fitted main
// loop. Measured: torch.mm in BF16 of 16,640×5,120×8,192 on an H100 PCIe
// (CUDA 12.9, PyTorch 2.10 nightly) at 433.0 TFLOP/s of 756.5
// (pytorch/ao PR #3342, "Gemm benchmark", November 2025).
const mamfH100PCIe = 433.0 / 756.5

const (
	mamfA100PCIe = 252.9 / 312
	mamfB200     = 1745.0 / 2250
	mamfMI300X   = 668.4 / 1307.4
)

// hbmEfficiency is the fraction of the datasheet DRAM bandwidth a streaming
// kernel reaches: 1.80 of 2.04 TB/s (88%) measured on an A100 80GB SXM,
// confirmed by Nsight Compute, and about 90% the best any kernel reached in
// the NVIDIA GTC talk it cites (NVIDIA Developer Forums, "Trouble to Reach
// Peak Bandwidth of A100", 2025). Measured on the A100 only; the other
// presets use it as an estimate.
const hbmEfficiency = 0.88

// nvidiaL2BytesPerClkPerSM is the L2 read bandwidth per SM per clock of the
// A100, the one NVIDIA part whose whitepaper states it: "A100 L2 cache read
// bandwidth: 5120 Bytes/clk" over 108 SMs (NVIDIA A100 Tensor Core GPU
// Architecture whitepaper, 2020, Table 3). Later whitepapers give no figure,
// so the other NVIDIA presets estimate their L2 bandwidth as this per-SM
// rate × SMs × boost clock.
const nvidiaL2BytesPerClkPerSM = 5120.0 / 108

func nvidiaL2(sms int, clockHz float64) float64 {
	return nvidiaL2BytesPerClkPerSM * float64(sms) * clockHz
}

// unalignedMMAFraction is GPU.UnalignedMMAFraction on the NVIDIA parts:
// fitted on the A100 (bench/fidelity FitUnaligned: the EleutherAI cookbook's
// 27,648 × n × 4,096 fp16 sweep, n no multiple of 8 and ≡ 4 mod 8; the
// rows ≡ 2 or 6 mod 8 held out, TestUnalignedFitIsOptimal), the one part
// with an unaligned GEMM measurement; the others take it, derived (their
// unaligned kernels load as narrowly).
const unalignedMMAFraction = 0.71

// kernelFit is the set of per-GPU parameters fitted on measured kernel
// times (see a100Fit).
type kernelFit struct {
	launchS, tensorEff, tileOverheadClk, hbmEff, rowFrac, gatherFrac, latencyS, gemmFrac, rotaryFrac, l2LatencyS float64
	// on is the part whose kernel tables they were fitted on.
	on string
}

// a100Fit and h100Fit are fitted on Vidur's CUPTI kernel times
// (microsoft/vidur data/profiling/compute/{a100,h100}, fp16 forward, one
// GPU; ../shared/reference/kernels/vidur_compute_ops.csv) of Qwen-72B,
// InternLM-20B, Llama-2-7B and Llama-2-70B at every TP degree and token
// count: Nelder–Mead on the mean over op classes of each class's mean and
// median |ln(timed/measured)|, where timed is each kernel's predicted time
// truncated to the microsecond as Vidur's timer records it (PyTorch's
// KinetoEvent::durationUs); fractions capped at 1. HBMEfficiency lands at
// 0.83 (A100) and 0.88 (H100) of the datasheet bandwidth, what their
// largest residual adds reach (A100: 1.70 TB/s at 4,096-32,768 tokens of
// 8,192, against the 1.80 TB/s of the hbmEfficiency measurement above);
// the GEMM operand streams reach all of it (A100, at the cap) or 98 %.
// Starts that end within 2 % of the best objective are a tie, taken by the
// basin these values start (the previous optimum, refined), else by the
// smallest fixed cost per tile (TestKernelFit).
// Command: go test ./bench/fidelity -run KernelFit -fit -v. Two are fitted
// after them, alone, each with the others held: l2LatencyS, the latency
// of the norm's second pass (L1 and L2 hits), on the same split's norm rows
// (bench/fidelity FitL2Latency, TestL2LatencyFitIsOptimal; the joint fit
// prices that pass at latencyS, as before it had its own parameter), and
// rotaryFrac, the rotary kernel's own bandwidth, on its RoPE rows
// (FitRotary, TestRotaryFitIsOptimal).
// Checked on
// CodeLlama-34B, Llama-3-8B, Llama-3-70B and phi-2 (H100: CodeLlama-34B and
// phi-2); the held-out median |error| is 5.0 % (A100) and 6.2 % (H100) for
// GEMMs, 0.0-4.7 % for the streaming classes (bench/fidelity/KERNELS.md).
// The fit starts from bench/fidelity.KernelFitStart at three tile
// overheads and from these values (a change to the model refines the last
// optimum; the stepped loss has several basins). Rerun, it returns the
// A100's within its steps; the H100's it moves along a shallow valley
// (fixed cost per tile against main-loop rate) to 6,050 cycles and 0.817,
// where the independent H100 checks (FlashAttention against cuDNN, Transformer
// Engine's GEMM benchmark) fail: the H100's stay at the valley's start
// (bench/fidelity/KERNELS.md).
var (
	a100Fit = kernelFit{launchS: 2.676e-06, tensorEff: 0.7785, tileOverheadClk: 2815, hbmEff: 0.8301, rowFrac: 0.5943, gatherFrac: 0.1875, latencyS: 3.323e-07, gemmFrac: 1, rotaryFrac: 0.555, l2LatencyS: 2.15e-07, on: "a100-80gb-sxm"}
	h100Fit = kernelFit{launchS: 1.928e-06, tensorEff: 0.7762, tileOverheadClk: 4105, hbmEff: 0.885, rowFrac: 0.5832, gatherFrac: 0.2102, latencyS: 3.048e-07, gemmFrac: 0.9948, rotaryFrac: 0.545, l2LatencyS: 3e-07, on: "h100-sxm"}
)

// apply sets the fitted parameters on a part built on the die they were
// fitted on; a field the part's literal already set (a part's own measured
// matmul efficiency) is kept.
func (f kernelFit) apply(g GPU) GPU {
	g.UnalignedMMAFraction = unalignedMMAFraction
	if g.TensorEfficiency == 0 {
		g.TensorEfficiency = f.tensorEff
	}
	g.HBMEfficiency, g.GEMMTileOverheadCycles = f.hbmEff, f.tileOverheadClk
	g.RowKernelBandwidthFraction, g.GatherBandwidthFraction, g.RotaryBandwidthFraction = f.rowFrac, f.gatherFrac, f.rotaryFrac
	g.MemoryLatencyS, g.GEMMBandwidthFraction, g.KernelLaunchS, g.L2LatencyS = f.latencyS, f.gemmFrac, f.launchS, f.l2LatencyS
	g.KernelParameters = derivedFrom(f.on)
	if g.Name == f.on {
		g.KernelParameters = "fitted on Vidur's kernel tables (bench/fidelity/KERNELS.md)"
	}
	return g
}

// Provenance of the kernel parameters of parts with no kernel table:
// mamfMeasured, the MAMF table's matmul rate with the rest from the
// datasheet; pcieEstimate, the datasheet with the A100 PCIe card's matmul
// efficiency standing in.
const (
	mamfMeasured = "measured: the MAMF table's best-shape BF16 matmul rate as the main loop; no kernel table for this part, the rest datasheet-derived"
	pcieEstimate = "datasheet-derived: no kernel table for this part; the A100 PCIe card's matmul efficiency (an estimate)"
)

// derivedFrom labels a part that takes another's fitted parameters.
func derivedFrom(name string) string {
	return "derived: " + name + "'s fitted parameters (the same SM and L2)"
}

// gh100 is a GH100 part (H100 SXM and PCIe, H200, H200 NVL): the H100
// SXM's fitted kernel parameters (h100Fit; fitted on the SXM part, derived
// for the others: same SM and L2) and Hopper's FP8 promotion interval.
func gh100(g GPU) GPU {
	g = h100Fit.apply(g)
	g.FP8PromotionIntervalK = hopperFP8PromotionK
	g.SyncMMAFraction = hopperSyncMMAFraction
	return g
}

// BlockScaledPresets names the GPU presets whose tensor cores apply block
// scales in the MMA (GPU.BlockScaledMMA), in GPUPresets' order.
func BlockScaledPresets() []string {
	var names []string
	for _, g := range GPUPresets() {
		if g.BlockScaledMMA() {
			names = append(names, g.Name)
		}
	}
	return names
}

// blackwellUltra completes a Blackwell Ultra preset from its peaks: 160
// SMs clocked as its FP32 peak gives (128 lanes an SM), the vector rate
// that peak, twice Blackwell's exponentials a clock, HBM3e at 8 TB/s, and
// the B200's SM and L2 (228 KB of shared memory, 126 MB of L2) with its
// datasheet-derived kernel parameters, there being no kernel table for
// these parts.
func blackwellUltra(g GPU) GPU {
	const sms = 160
	g.SMCount, g.ClockHz = sms, g.PeakFP32FlopsPerS/(sms*256)
	g.VectorFP32FlopsPerS = g.PeakFP32FlopsPerS
	g.ExpPerClockPerSM = 32
	g.SharedMemBytesPerSM, g.RegisterBytesPerSM = 228*kib, 256*kib
	g.L2Bytes, g.L2BandwidthBytesPerS = 126*mib, nvidiaL2(sms, g.ClockHz)
	g.HBMBandwidthBytesPerS = 8 * tera
	g.TensorEfficiency, g.UnalignedMMAFraction = mamfB200, unalignedMMAFraction
	g.HBMEfficiency, g.KernelLaunchS = hbmEfficiency, launchS
	g.KernelParameters = "derived: the B200's (Blackwell's SM); no kernel table for this part"
	return g
}

// GPUPresets returns every GPU preset, in a fixed order. The A100 and H100
// SXM carry kernel parameters fitted on measured kernel times (a100Fit,
// h100Fit); the H100 PCIe, H200 and H200 NVL share the H100's (same GH100 SM and L2:
// derived, not fitted). B200, MI300X, RTX A6000 and L40S have no kernel
// table: they keep datasheet-derived values (the MAMF matmul ceiling as
// the main-loop rate, no tile overhead, the default bandwidth fractions
// and launch cost), which price their GEMMs closer to best-shape speed.
func GPUPresets() []GPU {
	return append(basePresets(), h800())
}

// hopperSyncMMAFraction is the share of the GH100 parts' main-loop rate
// that kernels built on mma.sync reach (GPU.SyncMMAFraction): fitted on the
// FlashAttention-2 bars at head dim 128 of the FlashAttention-3 paper's H100
// benchmarks (Shah et al. 2024, arXiv 2407.08608, Figures 5 and 6;
// bench/fidelity FitSyncMMA, TestSyncMMAFitIsOptimal; the head-dim-64 bars
// held out). The paper's abstract puts FlashAttention-2 at 35 % of the
// H100's peak.
const hopperSyncMMAFraction = 0.53

// hopperFP8PromotionK is the GH100 parts' FP8 promotion interval
// (GPU.FP8PromotionIntervalK): 128 reduction elements.
const hopperFP8PromotionK = 128

// h800 is the H100 SXM's compute and memory with NVLink cut to 400 GB/s
// (both directions; the "nvlink4-h800" link). DeepSeek-AI 2024 (arXiv
// 2412.19437, §3.1-3.2) trained DeepSeek-V3 on 2,048 H800s, 8 per node on
// NVLink/NVSwitch, with 8 InfiniBand NICs of 400 Gb/s per node (dgx-h800).
func h800() GPU {
	for _, g := range basePresets() {
		if g.Name == "h100-sxm" {
			g.Name = "h800"
			g.KernelParameters = derivedFrom("h100-sxm")
			return g
		}
	}
	return GPU{}
}

func basePresets() []GPU {
	return []GPU{
		a100("a100-40gb", 40e9, 1555*giga),
		a100("a100-80gb-sxm", 80e9, 2039*giga),
		gh100(GPU{
			// NVIDIA H100 Tensor Core GPU datasheet (2023), "H100 SXM" column:
			// dense = half of the "with sparsity" tensor figures.
			Name: "h100-sxm", Vendor: "nvidia",
			PeakFP32FlopsPerS:   66.9 * tera,   // FP32 (CUDA cores) 67 TFLOPS
			PeakTF32FlopsPerS:   494.7 * tera,  // TF32 tensor 989 TFLOPS sparse
			PeakBF16FlopsPerS:   989.4 * tera,  // BF16 tensor 1,979 TFLOPS sparse
			PeakFP16FlopsPerS:   989.4 * tera,  // FP16 tensor 1,979 TFLOPS sparse
			PeakFP8FlopsPerS:    1978.9 * tera, // FP8 tensor 3,958 TFLOPS sparse
			PeakINT8OpsPerS:     1978.9 * tera, // INT8 tensor 3,958 TOPS sparse
			VectorFP32FlopsPerS: 66.9 * tera,
			// NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022):
			// 132 SMs in SXM5; up to 228 KB shared memory of the 256 KB
			// L1/shared per SM; 64K 32-bit registers (256 KB) per SM; 50 MB L2.
			SMCount: 132, ClockHz: 1.98 * giga, // boost 1,980 MHz (67 TF = 132·256·1.98 GHz)
			SharedMemBytesPerSM: 228 * kib, RegisterBytesPerSM: 256 * kib,
			L2Bytes: 50 * mib, L2BandwidthBytesPerS: nvidiaL2(132, 1.98*giga),
			HBMBytes: 80e9, HBMBandwidthBytesPerS: 3.35 * tera, // 80 GB HBM3, 3.35 TB/s
		}),
		gh100(GPU{
			// NVIDIA H100 Tensor Core GPU datasheet (2023), "H100 PCIe" column.
			Name: "h100-pcie", Vendor: "nvidia",
			PeakFP32FlopsPerS:   51.2 * tera,  // FP32 51 TFLOPS
			PeakTF32FlopsPerS:   378 * tera,   // TF32 756 TFLOPS sparse
			PeakBF16FlopsPerS:   756.5 * tera, // BF16 1,513 TFLOPS sparse
			PeakFP16FlopsPerS:   756.5 * tera, // FP16 1,513 TFLOPS sparse
			PeakFP8FlopsPerS:    1513 * tera,  // FP8 3,026 TFLOPS sparse
			PeakINT8OpsPerS:     1513 * tera,  // INT8 3,026 TOPS sparse
			VectorFP32FlopsPerS: 51.2 * tera,
			// H100 architecture whitepaper: 114 SMs in the PCIe product; same
			// SM (228 KB shared, 256 KB registers) and 50 MB L2.
			SMCount: 114, ClockHz: 1.755 * giga, // boost 1,755 MHz (51.2 TF = 114·256·1.755 GHz)
			SharedMemBytesPerSM: 228 * kib, RegisterBytesPerSM: 256 * kib,
			L2Bytes: 50 * mib, L2BandwidthBytesPerS: nvidiaL2(114, 1.755*giga),
			HBMBytes: 80e9, HBMBandwidthBytesPerS: 2.0 * tera, // 80 GB HBM2e, 2 TB/s
			// its own measured matmul efficiency (gh100 keeps it)
			TensorEfficiency: mamfH100PCIe,
		}),
		gh100(GPU{
			// NVIDIA H200 Tensor Core GPU datasheet (2024), "H200 SXM": the H100
			// SXM compute figures with 141 GB HBM3e at 4.8 TB/s.
			Name: "h200", Vendor: "nvidia",
			PeakFP32FlopsPerS:   66.9 * tera,
			PeakTF32FlopsPerS:   494.7 * tera,
			PeakBF16FlopsPerS:   989.4 * tera,
			PeakFP16FlopsPerS:   989.4 * tera,
			PeakFP8FlopsPerS:    1978.9 * tera,
			PeakINT8OpsPerS:     1978.9 * tera,
			VectorFP32FlopsPerS: 66.9 * tera,
			SMCount:             132, ClockHz: 1.98 * giga, // same GH100 SXM5 configuration
			SharedMemBytesPerSM: 228 * kib, RegisterBytesPerSM: 256 * kib,
			L2Bytes: 50 * mib, L2BandwidthBytesPerS: nvidiaL2(132, 1.98*giga),
			HBMBytes: 141e9, HBMBandwidthBytesPerS: 4.8 * tera,
		}),
		gh100(GPU{
			// NVIDIA H200 Tensor Core GPU datasheet (2024), "H200 NVL" column
			// (the 600 W PCIe card, 2- or 4-way NVLink bridge): dense = half
			// of the "with sparsity" tensor figures. No kernel table; checked
			// against Transformer Engine's GEMM benchmark on this card
			// (bench/fidelity/KERNELS.md).
			Name: "h200-nvl", Vendor: "nvidia",
			PeakFP32FlopsPerS:   60 * tera,     // FP32 60 TFLOPS
			PeakTF32FlopsPerS:   417.5 * tera,  // TF32 835 TFLOPS sparse
			PeakBF16FlopsPerS:   835.5 * tera,  // BF16 1,671 TFLOPS sparse
			PeakFP16FlopsPerS:   835.5 * tera,  // FP16 1,671 TFLOPS sparse
			PeakFP8FlopsPerS:    1670.5 * tera, // FP8 3,341 TFLOPS sparse
			PeakINT8OpsPerS:     1670.5 * tera, // INT8 3,341 TOPS sparse
			VectorFP32FlopsPerS: 60 * tera,
			// The SXM part's GH100 (132 SMs, 16,896 CUDA cores) at a lower
			// boost clock: 60 TF = 132·256·1.776 GHz.
			SMCount: 132, ClockHz: 1.776 * giga,
			SharedMemBytesPerSM: 228 * kib, RegisterBytesPerSM: 256 * kib,
			L2Bytes: 50 * mib, L2BandwidthBytesPerS: nvidiaL2(132, 1.776*giga),
			HBMBytes: 141e9, HBMBandwidthBytesPerS: 4.8 * tera, // 141 GB HBM3e, 4.8 TB/s
		}),
		{
			// NVIDIA HGX B200 datasheet (2024), per GPU = 8-GPU figure / 8,
			// dense = half of the sparse tensor figures: FP4 144 PF → 9 PF,
			// FP8 72 PF → 4.5 PF, BF16 36 PF → 2.25 PF, TF32 18 PF → 1.125 PF,
			// INT8 72 POPS → 4.5, FP32 600 TF → 75 TF; HBM3e 1,440 GB → 180
			// GB, 64 TB/s → 8 TB/s.
			Name: "b200", Vendor: "nvidia",
			PeakFP32FlopsPerS:   75 * tera,
			PeakTF32FlopsPerS:   1125 * tera,
			PeakBF16FlopsPerS:   2250 * tera,
			PeakFP16FlopsPerS:   2250 * tera,
			PeakFP8FlopsPerS:    4500 * tera,
			PeakINT8OpsPerS:     4500 * tera,
			PeakFP4FlopsPerS:    9000 * tera,
			VectorFP32FlopsPerS: 75 * tera,
			// NVIDIA publishes no SM count; Chips and Cheese, "Nvidia's B200:
			// Keeping the CUDA Juggernaut Rolling" (2025): 2 dies × 74 SMs = 148,
			// 256 KB L1/shared per SM with the H100's splits (228 KB shared max),
			// 126 MB L2. Clock from FP32: 75 TF / (148 SMs · 256 FLOP/clk) = 1.98 GHz.
			SMCount: 148, ClockHz: 1.98 * giga,
			SharedMemBytesPerSM: 228 * kib, RegisterBytesPerSM: 256 * kib,
			// The L2 figure is Hopper's per SM and clock. With it and the
			// register-file tiles compute prices, the best large matmuls are
			// L2-bound: 1,124 TFLOP/s at the MAMF table's best BF16 shape
			// (1792×16128×3072), where it measures 1,745, and 64 µs for the
			// 8192×2048×2048 GEMM TransformerEngine issue #2053 times at
			// 42 µs on a GB200. Blackwell's tensor-memory accumulators and
			// 2-SM MMAs (tcgen05) would price them at 1,644 TFLOP/s and
			// 45 µs, but move NeMo's B200 and GB200 training rows from
			// −11…+15 % to +5…+47 % (bench/fidelity): not built until what
			// those steps spend beyond their kernels is priced. Measured
			// again in December 2026 (each SM of a 2-SM pair loading half
			// the pair's B tile, its accumulators in tensor
			// memory): the MAMF rows read −6 to −10 % instead of −33 to
			// −36 %, the 25.11 rows +18…+34 % (B200, GB200) and +4…+15 %
			// (GB300); at Llama-3.1-8B's 4,096 × 4,096 GEMMs torch's BF16
			// on an SM100 part (vLLM PR #19566's benchmark) runs
			// 1,336–1,444 TFLOP/s at 512–2,048 tokens, priced 727–1,088
			// here and 914–1,383 with the 2-SM tiles.
			L2Bytes: 126 * mib, L2BandwidthBytesPerS: nvidiaL2(148, 1.98*giga),
			HBMBytes: 180e9, HBMBandwidthBytesPerS: 8 * tera,
			TensorEfficiency:     mamfB200,
			UnalignedMMAFraction: unalignedMMAFraction,
			HBMEfficiency:        hbmEfficiency,
			KernelLaunchS:        launchS,
			KernelParameters:     mamfMeasured,
		},
		{
			// NVIDIA GB200 NVL72 datasheet (2024), per GPU = the rack's figure
			// / 72, dense = half of the sparse tensor figures: FP4 1,440 PF →
			// 10 PF, FP8 720 PF → 5 PF, FP16/BF16 360 PF → 2.5 PF, TF32 180
			// PF → 1.25 PF, INT8 720 POPS → 5; HBM3e 13.4 TB → 186 GB, 576
			// TB/s → 8 TB/s. The
			// B200 die (148 SMs, 126 MB L2) at the Grace-Blackwell superchip's
			// higher power: its clock and FP32 rate are the B200's scaled by
			// the BF16 peaks (2.5 / 2.25; the datasheet gives no FP32 figure).
			Name: "gb200", Vendor: "nvidia",
			PeakFP32FlopsPerS:   75 * tera * 2.5 / 2.25,
			PeakTF32FlopsPerS:   1250 * tera,
			PeakBF16FlopsPerS:   2500 * tera,
			PeakFP16FlopsPerS:   2500 * tera,
			PeakFP8FlopsPerS:    5000 * tera,
			PeakINT8OpsPerS:     5000 * tera,
			PeakFP4FlopsPerS:    10000 * tera,
			VectorFP32FlopsPerS: 75 * tera * 2.5 / 2.25,
			SMCount:             148, ClockHz: 1.98 * giga * 2.5 / 2.25,
			SharedMemBytesPerSM: 228 * kib, RegisterBytesPerSM: 256 * kib,
			L2Bytes: 126 * mib, L2BandwidthBytesPerS: nvidiaL2(148, 1.98*giga*2.5/2.25),
			HBMBytes: 186e9, HBMBandwidthBytesPerS: 8 * tera,
			// the B200's measured matmul efficiency (no table for this part; derived, not fitted)
			TensorEfficiency:     mamfB200,
			UnalignedMMAFraction: unalignedMMAFraction,
			HBMEfficiency:        hbmEfficiency,
			KernelLaunchS:        launchS,
			KernelParameters:     "derived: the B200's (the same die); no kernel table for this part",
		},
		// Blackwell Ultra (NVIDIA, "Inside NVIDIA Blackwell Ultra: The Chip
		// Powering the AI Factory Era", 2025): 160 SMs, 15 PF of dense
		// NVFP4, special-function units issuing twice Blackwell's
		// exponentials (10.7 against 5 tera-exponentials a second), 288 GB
		// of HBM3e at 8 TB/s. Per GPU, dense = half the sparse tensor
		// figures, as the datasheets' rack or board totals divide (and as
		// Verda's "GB300 NVL72 architecture" table of 2025 lists them):
		// NVIDIA GB300 NVL72 (72 GPUs): FP4 1,080 PF dense → 15 PF, FP8
		// 720 PF sparse → 5, INT8 23 POPS → 0.16, FP16/BF16 360 → 2.5, TF32
		// 180 → 1.25, FP32 5,760 TF → 80 TF, 279 GB a GPU at 8 TB/s; NVIDIA
		// HGX B300 (8 GPUs): FP4 108 PF dense → 13.5, FP8 72 PF sparse →
		// 4.5, INT8 → 0.15, FP16/BF16 36 → 2.25, TF32 18 → 1.125, FP32 600
		// TF → 75 TF, 2.1 TB → 270 GB. Clock from FP32 over 160 SMs of 128
		// lanes. Kernel parameters as the other Blackwell parts' (derived).
		blackwellUltra(GPU{
			Name: "b300", Vendor: "nvidia",
			PeakFP32FlopsPerS: 75 * tera, PeakTF32FlopsPerS: 1125 * tera,
			PeakBF16FlopsPerS: 2250 * tera, PeakFP16FlopsPerS: 2250 * tera,
			PeakFP8FlopsPerS: 4500 * tera, PeakINT8OpsPerS: 150 * tera, PeakFP4FlopsPerS: 13500 * tera,
			HBMBytes: 270e9,
		}),
		blackwellUltra(GPU{
			Name: "gb300", Vendor: "nvidia",
			PeakFP32FlopsPerS: 80 * tera, PeakTF32FlopsPerS: 1250 * tera,
			PeakBF16FlopsPerS: 2500 * tera, PeakFP16FlopsPerS: 2500 * tera,
			PeakFP8FlopsPerS: 5000 * tera, PeakINT8OpsPerS: 160 * tera, PeakFP4FlopsPerS: 15000 * tera,
			HBMBytes: 279e9,
		}),
		{
			// AMD Instinct MI300X data sheet (2023): dense matrix peaks FP32
			// 163.4, TF32 653.7, FP16/BF16 1,307.4, FP8 2,614.9 TFLOPS, INT8
			// 2,614.9 TOPS; vector FP32 163.4 TFLOPS; 304 CUs at 2,100 MHz peak;
			// 192 GB HBM3 at 5.3 TB/s.
			Name: "mi300x", Vendor: "amd",
			PeakFP32FlopsPerS:   163.4 * tera,
			PeakTF32FlopsPerS:   653.7 * tera,
			PeakBF16FlopsPerS:   1307.4 * tera,
			PeakFP16FlopsPerS:   1307.4 * tera,
			PeakFP8FlopsPerS:    2614.9 * tera,
			PeakINT8OpsPerS:     2614.9 * tera,
			VectorFP32FlopsPerS: 163.4 * tera,
			// AMD CDNA 3 architecture whitepaper (2023): 64 KB LDS per CU,
			// 512 KB vector register file per CU; L2 4 MB per XCD × 8 XCDs,
			// 128 B/clk per channel × 16 channels = 2 KB/clk per XCD, so
			// 8 × 2048 B × 2.1 GHz = 34.4 TB/s aggregate. (The 256 MB Infinity
			// Cache behind it is not modelled as a separate level.)
			SMCount: 304, ClockHz: 2.1 * giga,
			SharedMemBytesPerSM: 64 * kib, RegisterBytesPerSM: 512 * kib,
			L2Bytes: 32 * mib, L2BandwidthBytesPerS: 8 * 2048 * 2.1 * giga,
			HBMBytes: 192e9, HBMBandwidthBytesPerS: 5.3 * tera,
			TensorEfficiency: mamfMI300X,
			HBMEfficiency:    hbmEfficiency,
			KernelLaunchS:    launchS,
			KernelParameters: mamfMeasured,
		},
		{
			// NVIDIA RTX A6000 datasheet (2021): FP32 38.7 TFLOPS, tensor
			// 309.7 TFLOPS with sparsity (FP16/BF16) → 154.8 dense, TF32
			// 154.8 sparse → 77.4 dense, INT8 619.4 TOPS sparse → 309.7 dense;
			// 48 GB GDDR6 at 768 GB/s; no FP8. NVIDIA Ampere GA102 GPU
			// Architecture whitepaper: 84 SMs, boost 1,800 MHz, 128 KB L1/shared
			// per SM of which up to 100 KB shared, 256 KB registers, 6 MB L2.
			Name: "rtx-a6000", Vendor: "nvidia",
			PeakFP32FlopsPerS:   38.7 * tera,
			PeakTF32FlopsPerS:   77.4 * tera,
			PeakBF16FlopsPerS:   154.8 * tera,
			PeakFP16FlopsPerS:   154.8 * tera,
			PeakINT8OpsPerS:     309.7 * tera,
			VectorFP32FlopsPerS: 38.7 * tera,
			SMCount:             84, ClockHz: 1.8 * giga,
			SharedMemBytesPerSM: 100 * kib, RegisterBytesPerSM: 256 * kib,
			L2Bytes: 6 * mib, L2BandwidthBytesPerS: nvidiaL2(84, 1.8*giga),
			HBMBytes: 48e9, HBMBandwidthBytesPerS: 768 * giga,
			TensorEfficiency:     mamfA100PCIe, // no measurement: the A100 PCIe card's (estimate)
			UnalignedMMAFraction: unalignedMMAFraction,
			HBMEfficiency:        hbmEfficiency,
			KernelLaunchS:        launchS,
			KernelParameters:     pcieEstimate,
			// CUDA C++ Programming Guide, compute capabilities 8.6 and 8.9:
			// 1,536 resident threads per SM (2,048 on 8.0 and 9.0).
			MaxThreadsPerSM: 1536,
		},
		{
			// NVIDIA L40S datasheet (2023): FP32 91.6 TFLOPS; dense tensor
			// (half the sparse figures) TF32 183, BF16/FP16 362.05, FP8 733
			// TFLOPS, INT8 733 TOPS; 48 GB GDDR6 at 864 GB/s. NVIDIA Ada GPU
			// Architecture whitepaper: 142 SMs (L40S), boost 2,520 MHz,
			// 128 KB L1/shared per SM (100 KB shared max), 256 KB registers, 96 MB L2.
			Name: "l40s", Vendor: "nvidia",
			PeakFP32FlopsPerS:   91.6 * tera,
			PeakTF32FlopsPerS:   183 * tera,
			PeakBF16FlopsPerS:   362.05 * tera,
			PeakFP16FlopsPerS:   362.05 * tera,
			PeakFP8FlopsPerS:    733 * tera,
			PeakINT8OpsPerS:     733 * tera,
			VectorFP32FlopsPerS: 91.6 * tera,
			SMCount:             142, ClockHz: 2.52 * giga,
			SharedMemBytesPerSM: 100 * kib, RegisterBytesPerSM: 256 * kib,
			L2Bytes: 96 * mib, L2BandwidthBytesPerS: nvidiaL2(142, 2.52*giga),
			HBMBytes: 48e9, HBMBandwidthBytesPerS: 864 * giga,
			TensorEfficiency:     mamfA100PCIe, // no measurement: the A100 PCIe card's (estimate)
			UnalignedMMAFraction: unalignedMMAFraction,
			HBMEfficiency:        hbmEfficiency,
			KernelLaunchS:        launchS,
			KernelParameters:     pcieEstimate,
			// CUDA C++ Programming Guide, compute capabilities 8.6 and 8.9:
			// 1,536 resident threads per SM (2,048 on 8.0 and 9.0).
			MaxThreadsPerSM: 1536,
		},
	}
}

// a100 builds the A100 SXM4 presets, which differ only in memory.
// NVIDIA A100 Tensor Core GPU datasheet (2021): FP32 19.5, TF32 156, BF16/FP16
// 312 TFLOPS dense, INT8 624 TOPS dense, no FP8; 40 GB HBM2 at 1,555 GB/s or
// 80 GB HBM2e at 2,039 GB/s (SXM). A100 architecture whitepaper (2020): 108 SMs
// at 1,410 MHz boost (312 TF = 108 SMs · 2,048 FLOP/clk · 1.41 GHz), 192 KB
// L1/shared per SM of which up to 164 KB shared, 256 KB registers, 40 MB L2 at
// 5,120 B/clk. Both carry a100Fit (fitted on the 80 GB part; the 40 GB one
// has the same SM and L2, its bandwidth fractions apply to its own HBM).
func a100(name string, hbmBytes int64, hbmBW float64) GPU {
	return a100Fit.apply(GPU{
		Name: name, Vendor: "nvidia",
		PeakFP32FlopsPerS:   19.5 * tera,
		PeakTF32FlopsPerS:   156 * tera,
		PeakBF16FlopsPerS:   312 * tera,
		PeakFP16FlopsPerS:   312 * tera,
		PeakINT8OpsPerS:     624 * tera,
		VectorFP32FlopsPerS: 19.5 * tera,
		SMCount:             108, ClockHz: 1.41 * giga,
		SharedMemBytesPerSM: 164 * kib, RegisterBytesPerSM: 256 * kib,
		L2Bytes: 40 * mib, L2BandwidthBytesPerS: nvidiaL2(108, 1.41*giga),
		HBMBytes: hbmBytes, HBMBandwidthBytesPerS: hbmBW,
	})
}

const (
	rdmaCollEff = 47.0 / 50
)

// linkPresets is LinkPresets built once for LinkByName, which the NCCL
// tuner calls per link of every communicator (a value copy is returned, so
// the table is never written).
var linkPresets = LinkPresets()

// LinkPresets returns every link preset, in a fixed order. Bandwidth is per
// direction; latency is one hop's one-way latency.
func LinkPresets() []Link {
	return []Link{
		// NVLink, per GPU aggregate per direction (NVIDIA A100/H100/B200
		// datasheets give the bidirectional total: 600, 900, 1,800 GB/s).
		// Latency: GPU-to-GPU through one NVSwitch hop, about 1 µs for small
		// transfers (estimate; NVIDIA publishes no figure).
		// Collective efficiency: the share of a link NCCL's own model counts,
		// its per-link NVLink bandwidth over the datasheet's 25 GB/s (NVLink
		// 3, 4) or 50 GB/s (NVLink 5) per link and direction: SM80_NVLINK_BW
		// 20.0, SM90_NVLINK_BW 20.6, SM100_NVLINK_BW 40.1 GB/s
		// (src/graph/topo.h, NVIDIA/nccl). On H100 that is 18 × 20.6 = 371 of
		// 450 GB/s, the "~20%" protocol overhead and 370 GB/s ring busbw an
		// NCCL maintainer states (NVIDIA/nccl-tests issue #212). The NCCL
		// tuner (core/net/nccl.go) builds its channels on this figure.
		{Name: "nvlink3", BandwidthBytesPerS: 300 * giga, LatencyS: 1e-6, CollectiveEfficiency: 20.0 / 25},
		{Name: "nvlink4", BandwidthBytesPerS: 450 * giga, LatencyS: 1e-6, CollectiveEfficiency: 20.6 / 25},
		{Name: "nvlink5", BandwidthBytesPerS: 900 * giga, LatencyS: 1e-6, CollectiveEfficiency: 40.1 / 50},
		// H800 NVLink: 400 GB/s bidirectional per GPU (NVIDIA H800
		// datasheet), 200 GB/s per direction; with NCCL's Hopper per-link
		// figure (20.6 of 25 GB/s) that is 165 GB/s, the "160 GB/s" NVLink DeepSeek-V3's report states
		// (arXiv 2412.19437, §3.2.2).
		{Name: "nvlink4-h800", BandwidthBytesPerS: 200 * giga, LatencyS: 1e-6, CollectiveEfficiency: 20.6 / 25},
		// PCI Express Base Specification 4.0 / 5.0: 16 / 32 GT/s per lane,
		// 128b/130b encoding, 16 lanes: 16e9·16·128/130/8 = 31.5 GB/s and
		// 63.0 GB/s per direction. Latency about 1.5 µs GPU-to-GPU through
		// a PCIe switch (estimate). Collective efficiency: NCCL counts a
		// PCIe link as width × per-lane figure / 80 (120 for 16 GT/s, 240
		// for 32 GT/s: kvDictPciGen in src/graph/topo.cc), 24 and 48 GB/s
		// for x16, i.e. 76 % of the encoded rate; Vidur's pairwise-NVLink
		// VMs measure 23.5 GB/s (Gen4) and 48.8 GB/s (Gen5) bus bandwidth
		// over such links (bench/fidelity/COLLECTIVES.md).
		{Name: "pcie4-x16", BandwidthBytesPerS: 16e9 * 16 * 128 / 130 / 8, LatencyS: 1.5e-6, CollectiveEfficiency: 24e9 / (16e9 * 16 * 128 / 130 / 8)},
		{Name: "pcie5-x16", BandwidthBytesPerS: 32e9 * 16 * 128 / 130 / 8, LatencyS: 1.5e-6, CollectiveEfficiency: 48e9 / (32e9 * 16 * 128 / 130 / 8)},
		// PCI Express Base Specification 6.0: 64 GT/s per lane in FLIT
		// mode, 236 transaction-layer bytes of each 256-byte FLIT, 16
		// lanes: 64e9·16/8·236/256 = 118 GB/s per direction; NCCL counts
		// 480 (×100 Mb/s) a lane, 96 GB/s for x16 (kvDictPciGen, "64.0
		// GT/s PCIe"). ConnectX-8's host interface: the GPU's link to its
		// SuperNIC on GB300 NVL72 (NVIDIA at Hot Chips 2025, as
		// ServeTheHome reported it: "a Gen6 x16 link to the B300 GPU").
		{Name: "pcie6-x16", BandwidthBytesPerS: 64e9 * 16 / 8 * 236 / 256, LatencyS: 1.5e-6, CollectiveEfficiency: 96e9 / (64e9 * 16 / 8 * 236 / 256)},
		// InfiniBand HDR 200 Gb/s (ConnectX-6), NDR 400 Gb/s (ConnectX-7),
		// XDR 800 Gb/s (ConnectX-8) per port per direction; NVIDIA's adapter
		// datasheets state sub-600 ns end-to-end latency and Quantum switches
		// about 130 ns per hop; 1 µs one-way per hop covers NIC + switch + cable.
		// Collective efficiency: NCCL over NDR 400 Gb/s "should see 46-48
		// GB/s per NIC" of 50 (NCCL maintainer, NVIDIA/nccl-tests issue
		// #290): 47/50; the other InfiniBand and RDMA Ethernet rates use it
		// as an estimate.
		{Name: "ib-hdr", BandwidthBytesPerS: 200 * gbitPerS, LatencyS: 1e-6, CollectiveEfficiency: rdmaCollEff},
		{Name: "ib-ndr", BandwidthBytesPerS: 400 * gbitPerS, LatencyS: 1e-6, CollectiveEfficiency: rdmaCollEff},
		{Name: "ib-xdr", BandwidthBytesPerS: 800 * gbitPerS, LatencyS: 1e-6, CollectiveEfficiency: rdmaCollEff},
		// 400 GbE RoCE v2 (e.g. ConnectX-7 / Spectrum-X): 400 Gb/s per
		// direction, about 2 µs one-way through a switch (estimate).
		{Name: "roce-400g", BandwidthBytesPerS: 400 * gbitPerS, LatencyS: 2e-6, CollectiveEfficiency: rdmaCollEff},
		// 100 Gb Ethernet (IEEE 802.3) with a kernel TCP stack: about 10 µs
		// one-way (estimate).
		{Name: "eth-100g", BandwidthBytesPerS: 100 * gbitPerS, LatencyS: 10e-6},
		// PCI Express Base Specification 3.0: 8 GT/s per lane, 128b/130b
		// encoding, 16 lanes: 8e9·16·128/130/8 = 15.75 GB/s per direction
		// (the x16 slot of V100- and T4-class servers; Gen4 doubles it, Gen5
		// doubles again, as the two entries above). Latency as the Gen4/Gen5
		// entries (estimate): a GPU-to-GPU or GPU-to-NIC transfer through
		// one PCIe switch; the transaction-layer time per generation differs
		// by nanoseconds, the DMA round trips that dominate are measured at
		// several hundred ns to about 1 µs per access on Xeon hosts
		// (Neugebauer et al., "Understanding PCIe performance for end host
		// networking", SIGCOMM 2018, pcie-bench).
		{Name: "pcie3-x16", BandwidthBytesPerS: 8e9 * 16 * 128 / 130 / 8, LatencyS: 1.5e-6},
		// AWS Elastic Fabric Adapter, one network card of a p4d.24xlarge:
		// "400 Gbps" EFA per instance over 4 network cards (Amazon EC2 P4d
		// instances page; EC2 User Guide, "Network cards": p4d.24xlarge has
		// 4 network cards), so 100 Gb/s per card per direction. Latency: AWS
		// publishes none for SRD; 5 µs one-way per hop is an estimate (EFA's
		// small-message latency is several times InfiniBand's). Collective
		// efficiency: the InfiniBand figure above (estimate).
		{Name: "efa-100g", BandwidthBytesPerS: 100 * gbitPerS, LatencyS: 5e-6, CollectiveEfficiency: rdmaCollEff},
	}
}

// GPUByName returns the GPU preset with this name.
func GPUByName(name string) (GPU, bool) {
	for _, g := range GPUPresets() {
		if g.Name == name {
			return g, true
		}
	}
	return GPU{}, false
}

// LinkByName returns the link preset with this name.
func LinkByName(name string) (Link, bool) {
	for _, l := range linkPresets {
		if l.Name == name {
			return l, true
		}
	}
	return Link{}, false
}

// GPUNames lists the GPU preset names in preset order.
func GPUNames() []string {
	ps := GPUPresets()
	out := make([]string, len(ps))
	for i, g := range ps {
		out[i] = g.Name
	}
	return out
}

// LinkNames lists the link preset names in preset order.
func LinkNames() []string {
	ps := LinkPresets()
	out := make([]string, len(ps))
	for i, l := range ps {
		out[i] = l.Name
	}
	return out
}
