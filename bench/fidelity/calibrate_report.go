package fidelity

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/eidolon-sim/eidolon/core/calibrate"
	"github.com/eidolon-sim/eidolon/core/hw"
	scal "github.com/eidolon-sim/eidolon/core/scenario/calibrate"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/eidolon-sim/eidolon/core/stats"
)

// calibrateMinS is the shortest Vidur GEMM the calibrate check uses: its
// timer truncates to the microsecond (KernelRow.Price), which the kind,
// given a profiler's times, does not model; at 20 µs that costs under 5 %.
const calibrateMinS = 20e-6

// CalibrateReport is KERNELS.md's section on the calibrate kind run as a
// user would run it on Vidur's GEMMs: the training split's GEMMs as the
// measurements, from the kernel fit's common start (KernelFitStart's GEMM
// figures, not the presets' fitted ones), then the held-out split priced
// with the gpu_spec it writes, beside the presets (fitted jointly on every
// class of the training split).
func CalibrateReport(rows []KernelRow) (string, error) {
	skus, by := BySKU(rows)
	var b strings.Builder
	b.WriteString("\n### The calibrate kind on Vidur's GEMMs\n\n")
	b.WriteString("The `calibrate` kind run as a user would run it: the training split's GEMMs of at least 20 µs (Vidur's timer truncates to the microsecond, which a profiler's times do not; above 20 µs that is under 5 %) as its `kernels`, " +
		"from the kernel fit's common start (tensor_efficiency 0.85, 2,000 cycles a tile, gemm_bandwidth_fraction 0.85, a 2 µs kernel; not the presets' fitted figures), no kernel held out; " +
		"then every held-out GEMM of at least 20 µs priced on the `gpu_spec` it writes, and on the preset, whose figures the joint fit of every kernel class set (`go test ./bench/fidelity -run KernelReport -update`).\n\n")
	b.WriteString("| GPU | fit GEMMs | iterations | tensor_efficiency | gemm_tile_overhead_cycles | held-out GEMMs | held-out median \\|err\\|, calibrated | held-out median \\|err\\|, preset |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, sku := range skus {
		g, err := VidurGPU(sku)
		if err != nil {
			return "", err
		}
		var train, held []calibrate.Kernel
		for _, r := range by[sku] {
			if r.Class != "gemm" || r.MeasuredS < calibrateMinS {
				continue
			}
			k := calibrate.Kernel{Op: calibrate.GEMM, Batch: 1, M: r.M, N: r.N, K: r.K, DType: hw.FP16, MeasuredS: r.MeasuredS}
			if HeldOut(r.Model) {
				held = append(held, k)
			} else {
				train = append(train, k)
			}
		}
		var ks []string
		for _, k := range train {
			ks = append(ks, fmt.Sprintf(`{"op":"gemm","m":%d,"n":%d,"k":%d,"dtype":"fp16","time_s":%g}`, k.M, k.N, k.K, k.MeasuredS))
		}
		js := fmt.Sprintf(`{"kind":"calibrate","gpu":{"preset":%q,"tensor_efficiency":%g,"gemm_tile_overhead_cycles":%g,"gemm_bandwidth_fraction":%g,"kernel_launch_s":%g},
			"held_out_every":0,"kernels":[%s]}`, g.Name, KernelFitStart[1], KernelFitStart[2], KernelFitStart[7], KernelFitStart[0], strings.Join(ks, ","))
		res, err := run(context.Background(), js)
		if err != nil {
			return "", fmt.Errorf("calibrate %s: %w", sku, err)
		}
		sum := res.Tables[0].Rows.([]scal.SummaryRow)[0]
		var gs spec.GPU
		if err := json.Unmarshal([]byte(sum.GPUSpec), &gs); err != nil {
			return "", err
		}
		fitted, ok := gs.Resolve()
		if !ok {
			return "", fmt.Errorf("calibrate %s: gpu_spec %s does not resolve", sku, sum.GPUSpec)
		}
		cal, err := calibrate.LogErrors(fitted, held)
		if err != nil {
			return "", err
		}
		pre, err := calibrate.LogErrors(g, held)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %.4g | %.0f | %d | %s | %s |\n", g.Name, len(train), sum.Iterations,
			fitted.TensorEfficiency, fitted.GEMMTileOverheadCycles, len(held), pct(medianRel(cal)), pct(medianRel(pre)))
	}
	b.WriteString("\nErrors are e^m − 1 of the median |ln(priced / measured)|, untruncated on both sides. The kind's four GEMM figures alone, fitted on the GEMMs alone, price the held-out GEMMs about as the joint eight-parameter fit does: what a user's own GEMM table gives a part with none.\n")
	return b.String(), nil
}

// medianRel is the median log error |ln(priced / measured)| as a relative
// error, e^x − 1.
func medianRel(logErrs []float64) float64 {
	return math.Expm1(stats.Median(logErrs))
}
