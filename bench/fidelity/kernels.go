package fidelity

// Per-kernel fidelity: core/compute's price of every operator in the public
// kernel tables of ../shared/reference/kernels (Vidur's CUPTI kernel times
// on A100 and H100; the EleutherAI cookbook's torch.mm/bmm sweeps on an
// A100) beside the measurement. The operators are built as Eidolon's model
// builds them (model.NewGEMM, model.NewStreaming with the builder's byte
// counts) and priced by compute.Evaluator: no row is looked up.

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/eidolon-sim/eidolon/core/calibrate"
	"github.com/eidolon-sim/eidolon/core/compute"
	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/eidolon-sim/eidolon/core/stats"
)

// KernelRow is one measured kernel time beside its price.
type KernelRow struct {
	GPU, Model, Op, Class string
	TP, Tokens            int64
	M, N, K               int64
	MeasuredS             float64
	// Ops are the operators the timer wraps (phi-2's add is two kernels).
	Ops  []model.Op
	Impl compute.Impl
}

// HeldOut reports whether a model is in the held-out split: CodeLlama-34B,
// Llama-3-8B, Llama-3-70B and phi-2 (GQA, a 128K vocabulary, an ungated
// GELU MLP with LayerNorm: shapes and kernels the training models lack).
// The parameters are fitted on Qwen-72B, InternLM-20B, Llama-2-7B and
// Llama-2-70B.
func HeldOut(model string) bool {
	switch model {
	case "codellama/CodeLlama-34b-Instruct-hf", "meta-llama/Meta-Llama-3-8B", "meta-llama/Meta-Llama-3-70B", "microsoft/phi-2":
		return true
	}
	return false
}

// VidurGPU is the preset behind a Vidur SKU folder: "a100" is the A100
// 80GB (DGX), "h100" the H100 SXM (reference README: large GEMMs above the
// PCIe and NVL dense peaks).
func VidurGPU(sku string) (hw.GPU, error) {
	name := map[string]string{"a100": "a100-80gb-sxm", "h100": "h100-sxm"}[sku]
	g, ok := hw.GPUByName(name)
	if !ok {
		return hw.GPU{}, fmt.Errorf("kernels: no preset for Vidur SKU %q", sku)
	}
	return g, nil
}

// SharedPath finds rel under the project's shared/ folder: ../shared/rel
// beside the module root (found from the working directory upwards), else
// /work/shared/rel (the path of this workplace's copy); "" if absent. Tests
// and benchmarks skip when it is.
func SharedPath(rel string) string {
	var tries []string
	if dir, err := os.Getwd(); err == nil {
		for d := dir; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				tries = append(tries, filepath.Join(d, "..", "shared", rel))
				break
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	for _, p := range append(tries, filepath.Join("/work/shared", rel)) {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// KernelsDir is the folder of the public kernel tables
// (shared/reference/kernels), or "" when absent.
func KernelsDir() string { return SharedPath(filepath.Join("reference", "kernels")) }

type vidurModel struct {
	hidden, ffn, heads, kvHeads, headDim int64
	gated, layerNorm, twoAdds            bool
}

func readCSV(path string) ([]map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	head, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []map[string]string
	for {
		rec, err := r.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		m := make(map[string]string, len(head))
		for i, h := range head {
			m[h] = rec[i]
		}
		out = append(out, m)
	}
}

func atoi(s string) int64 {
	v, _ := strconv.ParseInt(s, 10, 64)
	return v
}

// LoadVidur reads vidur_compute_ops.csv and builds each row's operators.
func LoadVidur(dir string) ([]KernelRow, error) {
	mrows, err := readCSV(filepath.Join(dir, "vidur_models.csv"))
	if err != nil {
		return nil, err
	}
	models := map[string]vidurModel{}
	for _, r := range mrows {
		models[r["model"]] = vidurModel{
			hidden: atoi(r["hidden"]), ffn: atoi(r["ffn"]), heads: atoi(r["n_q_heads"]),
			kvHeads: atoi(r["n_kv_heads"]), headDim: atoi(r["head_dim"]),
			gated: r["gated_mlp"] == "True", layerNorm: r["norm"] == "layer_norm",
			twoAdds: r["post_attn_norm"] == "False",
		}
	}
	return loadVidurRows(filepath.Join(dir, "vidur_compute_ops.csv"), models)
}

// LoadVidurDense reads vidur_gemm_dense_llama2.csv: the four GEMMs of
// Llama-2-7B and -70B at every token count Vidur profiled (259 from 1 to
// 4,096), where vidur_compute_ops.csv keeps 30 of them.
func LoadVidurDense(dir string) ([]KernelRow, error) {
	return loadVidurRows(filepath.Join(dir, "vidur_gemm_dense_llama2.csv"), nil)
}

// loadVidurRows reads one of Vidur's per-kernel tables and builds each
// row's operators; a table without an op_class column holds GEMMs.
func loadVidurRows(path string, models map[string]vidurModel) ([]KernelRow, error) {
	rows, err := readCSV(path)
	if err != nil {
		return nil, err
	}
	out := make([]KernelRow, 0, len(rows))
	for _, r := range rows {
		class, ok := r["op_class"]
		if !ok {
			class = "gemm"
		}
		vm, ok := models[r["model"]]
		if !ok && class != "gemm" {
			return nil, fmt.Errorf("kernels: model %q not in vidur_models.csv", r["model"])
		}
		ms, err := strconv.ParseFloat(r["time_ms_median"], 64)
		if err != nil {
			return nil, fmt.Errorf("kernels: time_ms_median %q: %w", r["time_ms_median"], err)
		}
		kr := KernelRow{GPU: r["gpu"], Model: r["model"], Op: r["op"], Class: class,
			TP: atoi(r["tp"]), Tokens: atoi(r["num_tokens"]), M: atoi(r["m"]), N: atoi(r["n"]), K: atoi(r["k"]),
			MeasuredS: ms * 1e-3}
		kr.Ops, kr.Impl = vidurOps(kr, vm)
		out = append(out, kr)
	}
	return out, nil
}

// vidurOps builds the operators a Vidur row's timer wraps, fp16, with the
// byte counts of Eidolon's model builder (core/model build.go, blocks.go);
// streaming ops carry their row shape (M rows of N elements).
func vidurOps(r KernelRow, vm vidurModel) ([]model.Op, compute.Impl) {
	const e = 2.0 // fp16
	d := hw.FP16
	T, w := r.M, r.N
	n := float64(T * w)
	shaped := func(o model.Op) model.Op { o.M, o.N = T, w; return o }
	switch r.Class {
	case "gemm":
		return []model.Op{model.NewGEMM(r.Op, d, 1, r.M, r.N, r.K)}, ""
	case "norm":
		// Builder: read x, write y, fp32 statistics per row; RMSNorm 5
		// FLOPs per element, LayerNorm 8.
		fl := 5.0
		if vm.layerNorm {
			fl = 8
		}
		impl := compute.ImplRow
		if vm.layerNorm {
			// phi-2's torch.nn.LayerNorm (vidur/profiling/mlp/mlp_impl.py):
			// PyTorch's own kernel, not sarathi's rms_norm.
			impl = compute.ImplRowVector
		}
		return []model.Op{shaped(model.NewStreaming(r.Op, model.Norm, d, fl*n, 2*n*e+8*float64(T)))}, impl
	case "rope":
		// In place on q and k: read and write each element, 3 FLOPs; the
		// kernel's launch geometry from the TP rank's heads.
		o := shaped(model.NewStreaming(r.Op, model.Rotary, d, 3*n, 2*n*e))
		o.Heads, o.KVHeads, o.HeadDim = vm.heads/r.TP, max(vm.kvHeads/r.TP, 1), vm.headDim
		return []model.Op{o}, compute.ImplRow
	case "embedding":
		// Read the token ids and rows, write the output.
		return []model.Op{shaped(model.NewStreaming(r.Op, model.Embedding, d, 0, 4*float64(T)+2*n*e))}, compute.ImplGather
	}
	switch r.Op {
	case "add":
		// Residual add: read 2, write 1. phi-2 sums attention, MLP and the
		// residual with two eager adds.
		o := shaped(model.NewStreaming(r.Op, model.Elementwise, d, n, 3*n*e))
		if vm.twoAdds {
			return []model.Op{o, o}, compute.ImplVectorized
		}
		return []model.Op{o}, compute.ImplVectorized
	case "mlp_act":
		if vm.gated {
			// sarathi silu_and_mul: a row kernel reading 2n, writing n.
			return []model.Op{shaped(model.NewStreaming(r.Op, model.Elementwise, d, 6*n, 3*n*e))}, compute.ImplRow
		}
		// torch.nn.GELU: PyTorch's vectorized elementwise kernel.
		return []model.Op{shaped(model.NewStreaming(r.Op, model.Elementwise, d, 8*n, 2*n*e))}, compute.ImplVectorized
	}
	return nil, ""
}

// Price is a row's predicted kernel time on an evaluator, and that time as
// Vidur's timer records it. Vidur sums the durations of the CUDA events in
// its timer (vidur/profiling/common/cuda_timer.py: cuda_time_total under
// torch.profiler), and PyTorch takes each kernel's duration in whole
// microseconds, truncated (KinetoEvent::durationUs, (end − start ns) / 1000
// in integer arithmetic, read by profiler_util's _parse_kineto_results):
// every one of the table's medians is a multiple of 0.5 µs, a median of
// whole-µs samples. So a kernel that runs 2.9 µs is recorded as 2 µs, and
// the model's time is compared as it would be recorded: each kernel's
// time truncated to the microsecond (an op of several kernels split evenly
// among them).
func (r KernelRow) Price(e *compute.Evaluator) (predS, timedS float64, err error) {
	for _, o := range r.Ops {
		c, err := e.OpAs(o, r.Impl)
		if err != nil {
			return 0, 0, err
		}
		predS += c.TimeS
		k := float64(max(c.Kernels, 1))
		timedS += k * math.Floor(c.TimeS/k*1e6) * 1e-6
	}
	return predS, timedS, nil
}

// KernelRange names a token-count range of the report.
func KernelRange(tokens int64) string {
	switch {
	case tokens <= 64:
		return "1-64"
	case tokens <= 512:
		return "65-512"
	case tokens <= 4096:
		return "513-4096"
	}
	return ">4096"
}

// KernelRanges lists the ranges in report order.
var KernelRanges = []string{"1-64", "65-512", "513-4096", ">4096"}

// KernelClasses lists the Vidur op classes in report order.
var KernelClasses = []string{"gemm", "norm", "elementwise", "rope", "embedding"}

// KernelErr is one priced row: the predicted time, and that time as the
// measurement's timer would record it (Price), which is what is compared.
type KernelErr struct {
	Row           *KernelRow
	PredS, TimedS float64
}

// Err is the signed error of the prediction as timed: timed/measured − 1.
func (k KernelErr) Err() float64 { return k.TimedS/k.Row.MeasuredS - 1 }

// LogErr is |ln(timed/measured)|.
func (k KernelErr) LogErr() float64 { return math.Abs(math.Log(k.TimedS / k.Row.MeasuredS)) }

// AbsErr is |timed/measured − 1|.
func (k KernelErr) AbsErr() float64 { return math.Abs(k.Err()) }

// PriceRows prices rows of one SKU on a GPU.
func PriceRows(g hw.GPU, rows []*KernelRow) ([]KernelErr, error) {
	e := compute.NewEvaluator(g)
	out := make([]KernelErr, 0, len(rows))
	for _, r := range rows {
		p, timed, err := r.Price(e)
		if err != nil {
			return nil, fmt.Errorf("%s %s tp%d T=%d: %w", r.GPU, r.Op, r.TP, r.Tokens, err)
		}
		out = append(out, KernelErr{Row: r, PredS: p, TimedS: timed})
	}
	return out, nil
}

// Quantile of xs, linear between order statistics (stats.Quantile);
// NaN for none.
func Quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	return stats.Quantile(xs, q)
}

// KernelStat is the error summary of one cell.
type KernelStat struct {
	N           int
	Median, P90 float64
	// Bias is the median signed error (pred/measured − 1).
	Bias float64
}

// Summarize gives the cell's |error| median, p90 and signed median.
func Summarize(es []KernelErr) KernelStat {
	abs := make([]float64, len(es))
	sig := make([]float64, len(es))
	for i, e := range es {
		abs[i] = e.AbsErr()
		sig[i] = e.Err()
	}
	return KernelStat{N: len(es), Median: Quantile(abs, 0.5), P90: Quantile(abs, 0.9), Bias: Quantile(sig, 0.5)}
}

// Filter keeps the priced rows a predicate accepts.
func Filter(es []KernelErr, keep func(*KernelRow) bool) []KernelErr {
	var out []KernelErr
	for _, e := range es {
		if keep(e.Row) {
			out = append(out, e)
		}
	}
	return out
}

// Objective is the fit's loss over one split: the mean over op classes of
// the class's mean and median |ln(pred/measured)| averaged, so that each
// class weighs the same and the typical row counts as much as the tails.
// It is calibrate.Objective, the calibrate kind's, with the classes taken
// in KernelClasses' order.
func Objective(es []KernelErr) float64 {
	var classes []string
	var errs []float64
	for _, c := range KernelClasses {
		for _, e := range es {
			if e.Row.Class == c {
				classes, errs = append(classes, c), append(errs, e.LogErr())
			}
		}
	}
	return calibrate.Objective(classes, errs)
}

// BySKU splits rows by Vidur SKU, in a fixed order.
func BySKU(rows []KernelRow) (skus []string, by map[string][]*KernelRow) {
	by = map[string][]*KernelRow{}
	for i := range rows {
		r := &rows[i]
		if _, ok := by[r.GPU]; !ok {
			skus = append(skus, r.GPU)
		}
		by[r.GPU] = append(by[r.GPU], r)
	}
	sort.Strings(skus)
	return skus, by
}

// pct and signedPct print a fraction as a percentage, "—" for none (the
// statistic of an empty cell).
func pct(x float64) string {
	if math.IsNaN(x) {
		return "—"
	}
	return fmt.Sprintf("%.1f%%", 100*x)
}

func signedPct(x float64) string {
	if math.IsNaN(x) {
		return "—"
	}
	return fmt.Sprintf("%+.1f%%", 100*x)
}
