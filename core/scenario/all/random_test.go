package all_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/stretchr/testify/require"
)

// The layouts a user can write are too many for hand-written cases. A
// seeded draw of training, inference and serving specs over the model zoo
// (cut to a few layers, so that each runs in milliseconds), the GPU and
// cluster presets and the parallel, precision, execution, engine and
// routing options must each run to finite tables or stop with a spec or
// simulation error, never panic; and validation (eidolon.validate) must
// refuse exactly the draws the run refuses as bad specs. Each draw is
// nudged towards the rules the spec checks state (expert options only for
// a mixture-of-experts model, every GPU of the cluster used, the overlaps
// with what they need), so that most of them run and the runs, not only
// the checks, are what is tested.
func TestRandomSpecsRunClean(t *testing.T) {
	// More draws: EIDOLON_RANDOM_SEED=n go test -run TestRandomSpecsRunClean
	seed := seedFromEnv("EIDOLON_RANDOM_SEED")
	rng := rand.New(rand.NewPCG(seed, 12))
	const draws = 240
	ran := 0
	for i := range draws {
		js, err := json.Marshal(randomSpec(rng))
		require.NoError(t, err)
		if requireRunsClean(t, context.Background(), js, fmt.Sprintf("draw %d", i)) {
			ran++
		}
	}
	t.Logf("seed %d: %d of %d draws ran", seed, ran, draws)
	// Not a check that only its failures can pass: most draws must run.
	require.GreaterOrEqual(t, ran, draws/2, "too few random draws ran to test anything")
}

// seedFromEnv is the seed an environment variable sets, else 2026.
func seedFromEnv(name string) uint64 {
	if v, err := strconv.ParseUint(os.Getenv(name), 10, 64); err == nil {
		return v
	}
	return 2026
}

// requireRunsClean runs a spec document and holds it to what every spec
// owes: no panic, validate refusing exactly what the run refuses as a bad
// spec (a clean problem list is a fine answer to a bad spec), finite
// tables. It reports whether the spec ran; a simulation error (a model
// that does not fit, a run over its bounds) is logged.
func requireRunsClean(t *testing.T, ctx context.Context, js []byte, what string) bool {
	t.Helper()
	verr := all.Validate(js, 0)
	_, res, err := all.Run(scenario.Env{Ctx: ctx}, js)
	var pe *scenario.PanicError
	require.False(t, errors.As(err, &pe), "%s panicked: %s\n%v", what, js, err)
	var se *spec.Error
	switch {
	case verr != nil:
		require.ErrorAs(t, err, &se, "%s: validate rejected what run took: %s\n%v", what, js, verr)
		return false
	case errors.As(err, &se):
		require.Fail(t, "run rejected what validate passed", "%s: %s\n%v", what, js, err)
	case err != nil:
		t.Logf("%s stopped: %v", what, err)
		return false
	}
	requireFinite(t, res, string(js))
	return true
}

var (
	randomModels = []string{"gpt-1.7b", "llama2-7b", "llama3-8b", "qwen3-8b", "mamba-370m", "mamba2-2.7b",
		"mixtral-8x7b", "deepseek-v3", "qwen3-30b-a3b", "qwen3-235b-a22b", "gpt-oss-20b"}
	randomMoE  = []string{"mixtral-8x7b", "deepseek-v3", "qwen3-30b-a3b", "qwen3-235b-a22b", "gpt-oss-20b"}
	randomGPUs = []string{"a100-80gb-sxm", "h100-sxm", "h200", "b200", "gb200", "b300", "gb300", "mi300x", "h800"}
	// Eight GPUs a node, each.
	randomClusters = []string{"dgx-a100", "dgx-h100", "dgx-h800", "dgx-b200", "aws-p4d"}
)

// randomSpec draws a training spec (one in two), an inference spec or a
// serving spec.
func randomSpec(rng *rand.Rand) map[string]any {
	pick := func(xs ...any) any { return xs[rng.IntN(len(xs))] }
	name := randomModels[rng.IntN(len(randomModels))]
	moe := slices.Contains(randomMoE, name)
	nodes := pick(1, 2, 4).(int)
	doc := map[string]any{
		"model":          map[string]any{"preset": name, "layers": pick(4, 8)},
		"gpu":            randomGPUs[rng.IntN(len(randomGPUs))],
		"cluster":        map[string]any{"preset": randomClusters[rng.IntN(len(randomClusters))], "nodes": nodes},
		"timeline_ranks": []int{-1},
	}
	switch rng.IntN(4) {
	case 0:
		delete(doc, "timeline_ranks") // serving has none
		doc["kind"] = "serving"
		doc["tp"] = pick(1, 2, 4, 8)
		doc["replicas"] = pick(1, 2)
		engine := map[string]any{"max_num_batched_tokens": pick(512, 8192), "chunked_prefill": rng.IntN(2) == 0,
			"prefix_caching": rng.IntN(2) == 0, "kv_cache_dtype": pick("auto", "fp8"), "kv_cache_free_memory_fraction": pick(0.0, 0.9)}
		if moe {
			engine["enable_expert_parallel"] = rng.IntN(2) == 0
		}
		doc["engine"] = engine
		doc["workload"] = map[string]any{"requests": pick(1, 20, 60), "rate_per_s": pick(1.0, 20.0, 200.0),
			"prompt_tokens": pick(1, 512, 4096), "output_tokens": pick(1, 64)}
		return doc
	case 1:
		doc["kind"] = "inference"
		doc["tp"] = pick(1, 2, 4, 8)
		doc["batch"] = pick(1, 8, 64)
		doc["prompt_tokens"] = pick(1, 128, 2048)
		doc["output_tokens"] = pick(1, 8, 64)
		doc["dtype"] = pick("bf16", "fp8", "fp4")
		doc["execution"] = pick("eager", "cuda_graphs")
		if moe && rng.IntN(2) == 0 {
			doc["enable_expert_parallel"] = true
		}
		return doc
	}
	tp, pp := pick(1, 2, 4).(int), pick(1, 2).(int)
	dp := 8 * nodes / (tp * pp) // every GPU of the cluster
	par := map[string]any{"tp": tp, "pp": pp, "dp": dp, "micro_batch": pick(1, 2),
		"recompute": pick("none", "selective", "full"), "zero": pick(0, 1, 2, 3)}
	par["global_batch"] = dp * par["micro_batch"].(int) * pp * pick(1, 2).(int)
	if tp > 1 && (moe || rng.IntN(2) == 0) {
		par["sequence_parallel"] = true // Megatron-Core's MoE needs it with TP
		par["tp_comm_overlap"] = rng.IntN(2) == 0
	}
	if z := par["zero"].(int); (z == 1 || z == 2) && rng.IntN(2) == 0 {
		par["overlap_grad_reduce"] = true
		par["overlap_param_gather"] = rng.IntN(2) == 0
	}
	if par["pp"].(int) > 1 && rng.IntN(2) == 0 {
		par["schedule"], par["virtual_stages"] = "interleaved", 2
	}
	if moe {
		par["ep"] = min(pick(1, 2, 4, 8).(int), dp)
		par["overlap_ep_comm"] = rng.IntN(2) == 0
		doc["routing"] = map[string]any{"distribution": pick("uniform", "balanced", "zipf")}
	}
	doc["kind"] = "training"
	doc["parallel"] = par
	doc["seq_len"] = pick(256, 1024, 4096)
	doc["dtype"] = pick("bf16", "fp16", "fp8")
	doc["execution"] = pick("eager", "cuda_graphs")
	if doc["dtype"] == "fp8" {
		doc["fp8_recipe"] = pick("delayed", "tensorwise", "blockwise", "mxfp8") // mxfp8: Blackwell's, a SpecError elsewhere
	}
	return doc
}
