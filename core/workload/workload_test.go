package workload

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func gpt(t *testing.T, name string) model.Config {
	c, ok := model.ByName(name)
	require.True(t, ok)
	return c
}

func layout(c model.Config, par Parallel) Training {
	if par.Schedule == "" {
		par.Schedule = OneFOneB
	}
	if par.VirtualStages == 0 {
		par.VirtualStages = 1
	}
	if par.Recompute == "" {
		par.Recompute = model.RecomputeNone
	}
	return Training{Model: c, Par: par, SeqLen: 2048, DType: hw.FP16, UnfusedAttention: true}
}

// The Megatron formula (Narayanan et al. 2021, eq. 3; reference README):
// F = 72·B·s·L·h²·(1 + s/(6h) + V/(12·L·h)) without recomputation and
// 96·B·s·L·h²·(1 + s/(6h) + V/(16·L·h)) with full recomputation. Per layer
// the forward's matmuls are QKV 6bsh², attention out 2bsh², MLP 16bsh²,
// scores and context 2bs²h each; backward twice the forward; full
// recomputation one more forward of every layer (not of the LM head, 2bshV).
func TestFLOPsMatchMegatronFormula(t *testing.T) {
	for _, tc := range []struct {
		name       string
		tp, pp, dp int
		gb, mb     int
	}{
		{"gpt-22b", 8, 1, 1, 4, 4},
		{"gpt3-175b", 8, 8, 2, 16, 1},
	} {
		c := gpt(t, tc.name)
		B, s, L, h, V := float64(tc.gb), 2048.0, float64(c.Layers), float64(c.Hidden), float64(c.Vocab)
		megatron := 72 * B * s * L * h * h * (1 + s/(6*h) + V/(12*L*h))
		full := 96 * B * s * L * h * h * (1 + s/(6*h) + V/(16*L*h))
		for _, rc := range []model.Recompute{model.RecomputeNone, model.RecomputeFull} {
			par := Parallel{TP: tc.tp, PP: tc.pp, DP: tc.dp, GlobalBatch: tc.gb, MicroBatch: tc.mb, Recompute: rc}
			p, err := BuildTraining(layout(c, par))
			require.NoError(t, err)
			assert.InEpsilon(t, megatron, p.ModelFLOPs, 1e-9, "%s %s model FLOPs", tc.name, rc)
			want := megatron
			if rc == model.RecomputeFull {
				want = full
			}
			assert.InEpsilon(t, want, p.HardwareFLOPs, 1e-9, "%s %s hardware FLOPs", tc.name, rc)
		}
	}
}

// Korthikanti et al. 2022 (arXiv 2205.05198), activation bytes per layer
// with 16-bit activations: TP only sbh(10 + 24/t + 5as/(ht)); TP+SP
// (sbh/t)(34 + 5as/h); TP+SP+selective 34sbh/t; full recompute 2sbh. A
// middle stage s of a 1F1B pipeline of p stages holds p−s micro-batches of
// its L/p layers at its peak (no embedding or LM head on it).
func TestActivationMemoryMatchesKorthikanti(t *testing.T) {
	c := gpt(t, "gpt3-175b")
	sq, b, h, a, tp := 2048.0, 1.0, float64(c.Hidden), float64(c.Heads), 8.0
	sbh := sq * b * h
	P, stage := 4, 1
	perStage := float64(c.Layers / P)
	inFlight := float64(P - stage)
	for _, tc := range []struct {
		mode    model.Recompute
		sp      bool
		perLyr  float64
		formula string
	}{
		{model.RecomputeNone, false, sbh * (10 + 24/tp + 5*a*sq/(h*tp)), "tensor parallel"},
		{model.RecomputeNone, true, sbh / tp * (34 + 5*a*sq/h), "tensor + sequence parallel"},
		{model.RecomputeSelective, true, 34 * sbh / tp, "tensor + sequence parallel + selective"},
		{model.RecomputeFull, false, 2 * sbh, "full recompute"},
	} {
		par := Parallel{TP: 8, PP: P, DP: 1, GlobalBatch: 8, MicroBatch: 1, Recompute: tc.mode, SequenceParallel: tc.sp}
		p, err := BuildTraining(layout(c, par))
		require.NoError(t, err)
		assert.InEpsilon(t, inFlight*perStage*tc.perLyr, p.Memory[stage].Activations, 1e-9, tc.formula)
	}
}

// Weights (2 B), fp32 main gradients (4 B) and Adam with an fp32 master
// copy (12 B) are 18 bytes per parameter: for GPT-3 175B at TP8 PP8 a
// middle stage holds 12 layers of 12h² + 13h parameters / 8, i.e. 45.56 GiB
// (Korthikanti et al. 2022, Figure 1).
func TestStaticMemoryPerParameter(t *testing.T) {
	c := gpt(t, "gpt3-175b")
	h := int64(c.Hidden)
	perLayer := (12*h*h + 13*h) / 8
	for _, zero := range []int{0, 1, 2, 3} {
		par := Parallel{TP: 8, PP: 8, DP: 4, GlobalBatch: 32, MicroBatch: 1, ZeRO: zero}
		p, err := BuildTraining(layout(c, par))
		require.NoError(t, err)
		// Replicated row-parallel biases make a rank's count a little above
		// 12 layers of (12h² + 13h)/8.
		params := float64(p.StageParams[3])
		assert.InDelta(t, float64(12*perLayer), params, 0.001*params)
		m := p.Memory[3]
		d := 4.0
		opt, grad, w := 12*params, 4*params, 2*params
		if zero >= 1 {
			opt /= d
		}
		if zero >= 2 {
			grad /= d
		}
		assert.InEpsilon(t, opt, m.Optimizer, 1e-12, "zero %d optimizer", zero)
		assert.InEpsilon(t, grad, m.Gradients, 1e-12, "zero %d gradients", zero)
		if zero < 3 {
			assert.InEpsilon(t, w, m.Weights, 1e-12, "zero %d weights", zero)
		} else {
			assert.Less(t, m.Weights, w/2)
		}
	}
	par := Parallel{TP: 8, PP: 8, DP: 1, GlobalBatch: 8, MicroBatch: 1}
	p, err := BuildTraining(layout(c, par))
	require.NoError(t, err)
	gib := (p.Memory[3].Weights + p.Memory[3].Gradients + p.Memory[3].Optimizer) / (1 << 30)
	assert.InDelta(t, 45.56, gib, 0.01*45.56, "Figure 1: parameters + optimizer state")
}

func TestScheduleOrders(t *testing.T) {
	for _, tc := range []struct {
		kind    Schedule
		p, m, v int
	}{
		{GPipe, 4, 6, 1}, {OneFOneB, 4, 6, 1}, {OneFOneB, 8, 3, 1}, {Interleaved, 4, 8, 2}, {Interleaved, 8, 16, 3},
	} {
		for s := 0; s < tc.p; s++ {
			order := StageOrder(tc.kind, tc.p, s, tc.m, tc.v)
			require.Len(t, order, 2*tc.m*tc.v)
			fwd := map[[2]int]bool{}
			for _, ps := range order {
				k := [2]int{ps.MB, ps.Chunk}
				if ps.Forward {
					require.False(t, fwd[k], "forward twice")
					fwd[k] = true
				} else {
					require.True(t, fwd[k], "%v backward before forward", k)
				}
			}
			unit := make([]float64, tc.v)
			for i := range unit {
				unit[i] = 1
			}
			peak := PeakInFlight(order, unit)
			switch tc.kind {
			case GPipe:
				assert.Equal(t, float64(tc.m), peak)
			case OneFOneB:
				assert.Equal(t, float64(min(tc.p-s, tc.m)), peak, "1F1B stage %d", s)
			}
			if tc.kind == Interleaved && s == 0 {
				// Korthikanti et al. §4.2.3: the first stage holds
				// p·v·(1 + (p−1)/(p·v)) = p·v + p − 1 chunks.
				assert.Equal(t, float64(tc.p*tc.v+tc.p-1), peak)
			}
		}
	}
}

func TestPlanStructure(t *testing.T) {
	c := gpt(t, "gpt-22b")
	c.Layers = 8
	c.Pattern = "AAAAAAAA"
	par := Parallel{TP: 2, PP: 2, DP: 2, GlobalBatch: 8, MicroBatch: 1, Schedule: Interleaved, VirtualStages: 2,
		SequenceParallel: true, OverlapGradReduce: true, BucketParams: 1, ZeRO: 1}
	p, err := BuildTraining(layout(c, par))
	require.NoError(t, err)
	require.Len(t, p.Units, 4)
	require.Equal(t, []int{0, 1}, p.Units[0].Ranks)
	require.Equal(t, []int{2, 3}, p.Units[1].Ranks) // replica 1, stage 0
	require.Equal(t, []int{4, 5}, p.Units[2].Ranks) // replica 0, stage 1
	// Every send has exactly one matching receive on the peer.
	type key struct{ g, tag int }
	sends, recvs := map[key]int{}, map[key]int{}
	for _, u := range p.Units {
		for _, task := range p.Programs[u.Program].Tasks {
			g := u.Groups[task.Slot]
			switch task.Kind {
			case Send:
				sends[key{g, int(task.Tag)}]++
			case Recv:
				recvs[key{g, int(task.Tag)}]++
			}
			for _, d := range task.Deps {
				require.Less(t, int(d), len(p.Programs[u.Program].Tasks))
			}
		}
	}
	require.Equal(t, sends, recvs)
	for k, n := range sends {
		require.Equal(t, 1, n, fmt.Sprint(k))
	}
	// Per-layer buckets: one reduce-scatter per block of each stage.
	rs := 0
	for _, task := range p.Programs[0].Tasks {
		if task.Stream == StreamDP && task.Coll == model.ReduceScatter {
			rs++
		}
	}
	require.Equal(t, 4+1, rs) // 4 transformer blocks + the embedding
}

func TestCheckReportsFields(t *testing.T) {
	c := gpt(t, "gpt-22b")
	bad := layout(c, Parallel{TP: 5, PP: 1, DP: 3, GlobalBatch: 4, MicroBatch: 1, ZeRO: 4})
	fields := map[string]bool{}
	for _, p := range bad.Check() {
		fields[p.Path] = true
	}
	require.True(t, fields["global_batch"], "4 is not a multiple of dp·micro_batch")
	require.True(t, fields["zero"])
	require.True(t, fields["tp"], "5 does not divide 64 heads")
}

// KV cache per GPU: 2 (K and V) · layers · kv_heads/t · head_dim · bytes ·
// batch · (prompt + output).
func TestInferenceMemory(t *testing.T) {
	c := gpt(t, "llama2-7b")
	in := Inference{Model: c, TP: 2, PP: 1, Replicas: 1, Batch: 4, Prompt: 100, Output: 28, DType: hw.BF16}
	p, err := BuildInference(in)
	require.NoError(t, err)
	want := 2.0 * 32 * 16 * 128 * 2 * 4 * 128
	assert.InEpsilon(t, want, p.Memory[0].KVCache, 1e-12)
	assert.InEpsilon(t, float64(model.Params(c))*2/2, p.Memory[0].Weights, 0.01)
	n, err := in.LongestPrompt(80e9)
	require.NoError(t, err)
	at, _ := in.PeakMemory(n)
	above, _ := in.PeakMemory(n + 1)
	require.LessOrEqual(t, at, 80e9)
	require.Greater(t, above, 80e9)
	in.Batch = 8
	n8, err := in.LongestPrompt(80e9)
	require.NoError(t, err)
	require.Less(t, n8, n)
}

// A decode attention's workspace is its queries and output, not the cache
// it reads (counted as the KV cache): for llama2-7b at TP 2, 4 sequences
// of 16 heads of 128, two bf16 tensors of 4·16·128 elements.
func TestDecodeAttentionWorkspace(t *testing.T) {
	o := model.NewDecodeAttention("attn.decode", hw.BF16, 2, 4, 16, 16, 4096, 128)
	require.Equal(t, 2.0*4*16*128*2, opTensors(o))
	require.Greater(t, o.Bytes, 1000*opTensors(o), "the op still moves its cache")
}

// Size finds the same memory as the full layout, without laying out tasks.
func TestSizeMatchesPlan(t *testing.T) {
	c := gpt(t, "gpt3-175b")
	for _, zero := range []int{0, 1, 3} {
		tr := layout(c, Parallel{TP: 8, PP: 8, DP: 2, GlobalBatch: 32, MicroBatch: 2, ZeRO: zero,
			Recompute: model.RecomputeSelective, SequenceParallel: true})
		p, err := BuildTraining(tr)
		require.NoError(t, err)
		sz, err := tr.Size(func(o model.Op) (float64, error) { return o.FLOPs / 312e12, nil })
		require.NoError(t, err)
		require.Equal(t, p.Memory, sz.Memory)
		zero := make([]float64, len(sz.Forward))
		require.Greater(t, sz.Bound(zero, zero, zero), 0.0)
	}
}

// The host's synchronisation points: the optimizer waits (on the host) for
// what it depends on (the found-inf / grad-norm .item()); the task after a
// pipeline receive waits for the receive (Megatron's torch.cuda.synchronize
// after batched p2p); each decode step waits for the step before it (the
// sampled tokens read back).
func TestHostSyncPoints(t *testing.T) {
	c, ok := model.FromPreset("gpt-22b", model.Config{Layers: 4})
	require.True(t, ok)
	tr := layout(c, Parallel{TP: 2, PP: 2, DP: 2, MicroBatch: 1, GlobalBatch: 4})
	plan, err := BuildTraining(tr)
	require.NoError(t, err)
	for _, p := range plan.Programs {
		opt := p.Tasks[p.Marks["optimizer"]]
		assert.Equal(t, opt.Deps, opt.HostWait)
		for i, task := range p.Tasks {
			if task.Kind == Recv {
				require.Less(t, i+1, len(p.Tasks))
				assert.Contains(t, p.Tasks[i+1].HostWait, int32(i), "%s", task.Name)
			}
			for _, w := range task.HostWait {
				assert.Less(t, int(w), i, "a host waits only for earlier tasks")
			}
		}
	}
	in := Inference{Model: gpt(t, "llama2-7b"), TP: 1, PP: 1, Replicas: 1, Batch: 1, Prompt: 16, Output: 4, DType: hw.FP16}
	ip, err := BuildInference(in)
	require.NoError(t, err)
	p := ip.Programs[0]
	for step := 1; step < in.Steps(); step++ {
		prev := p.Marks[fmt.Sprintf("step.%d", step-1)]
		first := prev + 1
		assert.Equal(t, []int32{prev}, p.Tasks[first].HostWait, "step %d", step)
	}
}

// The interleaved schedule overlaps its transfers (Megatron-LM's
// overlap_p2p_comm): no receive makes the host wait, and a pass that
// receives, when the pass before it ran the other way (forward after
// backward, or backward after forward), finds its receive posted before
// that pass: right after the previous pass of its own direction (the
// first receive of each direction has none before it).
func TestInterleavedReceivesPostedEarly(t *testing.T) {
	c, ok := model.FromPreset("gpt-22b", model.Config{Layers: 8})
	require.True(t, ok)
	tr := layout(c, Parallel{TP: 2, PP: 2, DP: 2, GlobalBatch: 8, MicroBatch: 1, Schedule: Interleaved, VirtualStages: 2})
	plan, err := BuildTraining(tr)
	require.NoError(t, err)
	forward := func(task Task) bool { return strings.Contains(task.Name, ".fwd.") }
	for _, p := range plan.Programs {
		overlapped, seen := 0, map[bool]bool{}
		for i, task := range p.Tasks {
			for _, w := range task.HostWait {
				assert.NotEqual(t, Recv, p.Tasks[w].Kind, "%s waits on the host for a receive", task.Name)
			}
			if task.Kind != Recv {
				continue
			}
			// The receive's pass starts at the first compute task after it
			// that depends on it, directly or through the pass's gather.
			consumer := -1
			for j := i + 1; j < len(p.Tasks) && consumer < 0; j++ {
				for _, d := range p.Tasks[j].Deps {
					if d == int32(i) || (p.Tasks[d].Kind == Collective && slices.Contains(p.Tasks[d].Deps, int32(i))) {
						if p.Tasks[j].Kind == Compute {
							consumer = j
						}
					}
				}
			}
			require.Positive(t, consumer, task.Name)
			prev := -1
			for k := consumer - 1; k >= 0 && prev < 0; k-- {
				if p.Tasks[k].Kind == Compute {
					prev = k
				}
			}
			first := !seen[forward(p.Tasks[consumer])]
			seen[forward(p.Tasks[consumer])] = true
			if !first && prev >= 0 && forward(p.Tasks[prev]) != forward(p.Tasks[consumer]) {
				assert.Less(t, i, prev, "%s is posted before the pass that runs the other way", task.Name)
				overlapped++
			}
		}
		assert.Positive(t, overlapped)
	}
}

// An operator that blocks the host (model.Op.HostSync: gpt-oss's
// activation under Megatron-Core) starts a compute task of its own, which
// the host issues only once the task before it, in the same segment, has
// run: in the forward and in moe_act's recomputation, once a micro-batch
// and MoE layer each.
func TestOperatorHostSync(t *testing.T) {
	c, ok := model.FromPreset("gpt-oss-20b", model.Config{Layers: 2})
	require.True(t, ok)
	tr := layout(c, Parallel{TP: 1, PP: 1, DP: 4, EP: 4, ExpertTP: 1, MicroBatch: 1, GlobalBatch: 8,
		Recompute: model.RecomputeSelective, RecomputeModules: []string{model.ModuleMoEAct}})
	tr.SeqLen, tr.DType = 512, hw.BF16
	plan, err := BuildTraining(tr)
	require.NoError(t, err)
	p := plan.Programs[0]
	var syncs int
	for i, task := range p.Tasks {
		for j, o := range task.Ops {
			if !o.HostSync {
				continue
			}
			syncs++
			require.Zero(t, j, "%s starts its task", o.Name)
			prev := p.Tasks[i-1]
			assert.Equal(t, []int32{int32(i - 1)}, task.HostWait, task.Name)
			assert.Contains(t, task.Deps, int32(i-1))
			assert.Equal(t, Compute, prev.Kind)
			assert.True(t, strings.HasPrefix(prev.Ops[len(prev.Ops)-1].Name, "moe.experts.glu_clamp"), prev.Name)
		}
	}
	// 2 micro-batches × 2 MoE layers, forward and recomputed.
	assert.Equal(t, 8, syncs)
}

// The dispatch's host synchronisation: in a training step with expert
// parallelism the host waits, before each forward dispatch all-to-all, for
// the router's task (the token counts it copies to the host), having
// issued the permutation before the wait; the combine and the backward's
// all-to-alls reuse the sizes, and a full recomputation waits again.
func TestDispatchHostSync(t *testing.T) {
	c, ok := model.FromPreset("mixtral-8x7b", model.Config{Layers: 2})
	require.True(t, ok)
	for _, rc := range []model.Recompute{model.RecomputeNone, model.RecomputeFull} {
		tr := layout(c, Parallel{TP: 1, PP: 1, DP: 4, EP: 4, ExpertTP: 1, MicroBatch: 1, GlobalBatch: 8, Recompute: rc})
		tr.SeqLen, tr.DType, tr.UnfusedAttention = 512, hw.BF16, false
		plan, err := BuildTraining(tr)
		require.NoError(t, err)
		p := plan.Programs[0]
		var dispatches, waits int
		for i, task := range p.Tasks {
			if task.Coll != AllToAllV {
				continue
			}
			fwd := strings.HasSuffix(task.Name, "moe.dispatch.all_to_all")
			if !fwd {
				assert.Empty(t, task.HostWait, task.Name)
				continue
			}
			dispatches++
			// dispatch ← permute ← router segment; the host waits for the router.
			perm := p.Tasks[i-1]
			require.Equal(t, []model.Op{perm.Ops[0]}, perm.Ops, perm.Name)
			assert.Equal(t, model.OpPermute, perm.Ops[0].Name)
			assert.Empty(t, perm.HostWait)
			assert.Equal(t, []int32{int32(i - 2)}, task.HostWait, task.Name)
			assert.Equal(t, "moe.router.topk", p.Tasks[i-2].Ops[len(p.Tasks[i-2].Ops)-1].Name)
			waits++
		}
		// 2 micro-batches × 2 MoE layers, forward (and recomputed).
		want := 4
		if rc == model.RecomputeFull {
			want = 8
		}
		assert.Equal(t, want, dispatches, rc)
		assert.Equal(t, want, waits)
	}
	// Neither drop-and-pad routing, which sizes every all-to-all by the
	// capacity, nor an inference engine has the host wait.
	noWaits := func(plan *Plan, why string) {
		var a2a int
		for _, task := range plan.Programs[0].Tasks {
			if task.Coll == AllToAllV {
				a2a++
				assert.Empty(t, task.HostWait, "%s: %s", why, task.Name)
			}
		}
		assert.Positive(t, a2a, why)
	}
	tr := layout(c, Parallel{TP: 1, PP: 1, DP: 4, EP: 4, ExpertTP: 1, MicroBatch: 1, GlobalBatch: 8})
	tr.SeqLen, tr.DType = 512, hw.BF16
	tr.Routing = Routing{CapacityFactor: 1, PadToCapacity: true}
	plan, err := BuildTraining(tr)
	require.NoError(t, err)
	noWaits(plan.Plan, "drop and pad")
	in := Inference{Model: c, TP: 1, PP: 1, EP: 4, Replicas: 4, Batch: 4, Prompt: 16, Output: 2, DType: hw.BF16}
	ip, err := BuildInference(in)
	require.NoError(t, err)
	noWaits(ip.Plan, "inference engines do not wait")

	// Two-batch overlap runs the prefill's MoE layers beside the all-to-all
	// kernels' SMs (SGLang sizes DeepGEMM for the SMs DeepEP leaves), the
	// embedding and the output layer with every SM, and the decode too
	// (DeepEP's low-latency kernels hold none while they wait).
	in.TwoBatchOverlap = true
	ip, err = BuildInference(in)
	require.NoError(t, err)
	beside := map[bool]int{}
	for _, task := range ip.Programs[0].Tasks {
		if task.Kind == Compute && task.Ops != nil {
			moe := strings.HasPrefix(task.Name, "prefill.") && !strings.Contains(task.Name, ".embed.") && !strings.Contains(task.Name, ".head.")
			assert.Equal(t, moe, task.BesideComm, task.Name)
			beside[moe]++
		}
	}
	assert.Positive(t, beside[true])
	assert.Positive(t, beside[false])
}

// With overlapped gradient reduction the routed experts' gradients are
// reduce-scattered over the expert-DP group in buckets of their own as the
// backward produces them (Megatron-Core's expert_parallel_buffers), not in
// one collective after the backward; the buckets carry every expert
// gradient once.
// ZeRO-3 with expert parallelism: before each pass a block gathers its
// dense weights over the DP group and its routed experts' over the
// expert-DP group that shards them, each micro-batch's forward and
// backward; the experts' weights are held as 1/EDP shards.
func TestZeRO3GathersExpertsOverExpertDP(t *testing.T) {
	c, ok := model.FromPreset("mixtral-8x7b", model.Config{Layers: 2})
	require.True(t, ok)
	par := Parallel{TP: 1, PP: 1, DP: 8, EP: 4, ExpertTP: 1, MicroBatch: 1, GlobalBatch: 16, ZeRO: 3, OverlapGradReduce: true}
	tr := layout(c, par)
	tr.SeqLen, tr.DType, tr.UnfusedAttention = 512, hw.BF16, false
	require.Empty(t, tr.Check())
	plan, err := BuildTraining(tr)
	require.NoError(t, err)
	g, err := model.Build(c, tr.microRun())
	require.NoError(t, err)
	var expert float64
	for _, bi := range g.Order {
		expert += float64(g.Blocks[bi].ExpertParams)
	}
	var gathered float64
	for _, task := range plan.Programs[0].Tasks {
		if task.Coll == model.AllGather && task.Slot == SlotEDP {
			gathered += task.Bytes
		}
	}
	m := float64(tr.MicroBatches())
	require.InEpsilon(t, 2*m*expert*2, gathered, 1e-12, "bf16 expert weights, forward and backward, every micro-batch")
	// EDP = 8 / 4 = 2: the experts' weights held as halves, the dense
	// ones as eighths, and two gathered blocks whole.
	var all, widest float64
	for _, bi := range g.Order {
		n := float64(g.Blocks[bi].Params + g.Blocks[bi].SharedParams)
		all += n
		widest = max(widest, n)
	}
	dense := all - expert
	require.InEpsilon(t, 2*(dense/8+expert/2+2*widest), plan.Memory[0].Weights, 1e-9)
}

func TestExpertGradientBuckets(t *testing.T) {
	c, ok := model.FromPreset("mixtral-8x7b", model.Config{Layers: 4})
	require.True(t, ok)
	for _, overlap := range []bool{false, true} {
		tr := layout(c, Parallel{TP: 1, PP: 1, DP: 8, EP: 4, ExpertTP: 1, MicroBatch: 1, GlobalBatch: 16, ZeRO: 1,
			OverlapGradReduce: overlap, BucketParams: 100_000_000})
		tr.SeqLen, tr.DType, tr.UnfusedAttention = 512, hw.BF16, false
		plan, err := BuildTraining(tr)
		require.NoError(t, err)
		p := plan.Programs[0]
		g, err := model.Build(c, tr.microRun())
		require.NoError(t, err)
		var expert int64
		for _, blk := range g.Blocks {
			expert += blk.ExpertParams * int64(max(blk.Count, 1))
		}
		lastCompute := int32(-1)
		for i, task := range p.Tasks {
			if task.Kind == Compute && task.MicroBatch >= 0 {
				lastCompute = int32(i)
			}
		}
		var bytes float64
		var buckets, early int
		for _, task := range p.Tasks {
			if task.Slot != SlotEDP || task.Coll != model.ReduceScatter {
				continue
			}
			buckets++
			bytes += task.Bytes
			if task.Deps[0] < lastCompute {
				early++
			}
		}
		assert.InDelta(t, float64(expert)*4, bytes, 1, "overlap %v", overlap)
		if overlap {
			// 4 layers of 8/4 experts of 3·4096·14336 parameters: 352M per
			// layer, a bucket per layer, each starting during the backward
			// (before the embedding's).
			assert.Equal(t, 4, buckets)
			assert.Equal(t, 4, early)
		} else {
			assert.Equal(t, 1, buckets)
			assert.Zero(t, early)
		}
	}
}

// Model FLOPs do not depend on the routing: a skewed draw, with expert TP
// 1 under TP 2 (each unit then runs at its most loaded TP rank's expert
// tokens) or expert TP = TP, and capacity drops, all count the balanced
// step's matmuls, which are the active parameters' and the attention's.
func TestModelFLOPsIndependentOfRouting(t *testing.T) {
	c, ok := model.FromPreset("mixtral-8x7b", model.Config{Layers: 2})
	require.True(t, ok)
	for _, etp := range []int{1, 2} {
		par := Parallel{TP: 2, PP: 1, DP: 4, EP: 4, ExpertTP: etp, SequenceParallel: true, MicroBatch: 1, GlobalBatch: 8}
		tr := layout(c, par)
		tr.SeqLen, tr.DType, tr.UnfusedAttention = 1024, hw.BF16, false
		balanced, err := BuildTraining(tr)
		require.NoError(t, err)
		require.Positive(t, balanced.ModelFLOPs)
		for _, r := range []Routing{
			{Distribution: RouteZipf, Skew: 0.6, Seed: 3},
			{Distribution: RouteUniform, Seed: 3, CapacityFactor: 1},
		} {
			tr.Routing = r
			p, err := BuildTraining(tr)
			require.NoError(t, err)
			require.False(t, p.Routing.Balanced(), "%+v", r)
			require.InEpsilon(t, balanced.ModelFLOPs, p.ModelFLOPs, 1e-12, "expert TP %d, %+v", etp, r)
			if r.CapacityFactor > 0 {
				continue
			}
			if etp == 1 {
				// Each unit runs its most loaded TP rank's expert tokens:
				// the programs run more than the model's FLOPs.
				require.Greater(t, p.HardwareFLOPs, p.ModelFLOPs)
			} else {
				// One program per EP rank: every routed slot runs once; the
				// hardware count adds only FlashAttention's recomputed
				// scores, half a forward per backward.
				n := float64(par.TP*par.DP) / float64(p.ProgramsPerStage)
				var rescored float64
				for _, prog := range p.Programs {
					for _, task := range prog.Tasks {
						for _, o := range task.Ops {
							rescored += n * (o.FLOPs - o.ModelFLOPs())
						}
					}
				}
				require.Positive(t, rescored)
				require.InEpsilon(t, p.ModelFLOPs+rescored, p.HardwareFLOPs, 1e-12)
			}
		}
	}
}

// Megatron-Core's pipeline split accounting for the embedding and the loss
// (Llama 3 405B's 126 layers on 16 stages of 8 chunks, Dubey et al. 2024
// §3.3.2: the first chunk holds only the embedding, the last only the
// output projection and the loss): each takes one layer's slot, so 6
// layers fill 8 chunks, the first and last chunk holding no layer, and a
// split that does not account for them needs as many layers as chunks.
func TestPipelineSplitAccountsForEmbeddingAndLoss(t *testing.T) {
	c, ok := model.FromPreset("llama2-7b", model.Config{Layers: 6})
	require.True(t, ok)
	par := Parallel{TP: 1, PP: 4, DP: 1, MicroBatch: 1, GlobalBatch: 4, Schedule: Interleaved, VirtualStages: 2,
		AccountForEmbedding: true, AccountForLoss: true}
	tr := layout(c, par)
	require.Empty(t, tr.Check())
	g, err := model.Build(c, tr.microRun())
	require.NoError(t, err)
	chunks := par.chunks(g)
	require.Len(t, chunks, 8)
	name := func(i int) string { return g.Blocks[i].Name }
	require.Len(t, chunks[0], 1)
	require.Equal(t, model.BlockEmbedding, name(chunks[0][0]))
	require.Equal(t, model.BlockLMHead, name(chunks[7][0]))
	layers := 0
	for _, ch := range chunks[1:7] {
		require.Len(t, ch, 1)
		require.NotEqual(t, model.BlockEmbedding, name(ch[0]))
		layers++
	}
	require.Equal(t, 6, layers)
	_, err = BuildTraining(tr)
	require.NoError(t, err)

	// The embedding alone accounted: 7 slots over 4 chunks, 2, 2, 2, 1
	// from the front, the first chunk's first slot the embedding's, so the
	// chunks hold 1, 2, 2 and 1 layers.
	par.VirtualStages, par.AccountForLoss = 1, false
	chunks = par.chunks(g)
	var perChunk []int
	for _, ch := range chunks {
		n := 0
		for _, bi := range ch {
			if b := name(bi); b != model.BlockEmbedding && b != model.BlockLMHead {
				n++
			}
		}
		perChunk = append(perChunk, n)
	}
	require.Equal(t, []int{1, 2, 2, 1}, perChunk)
	require.Equal(t, model.BlockEmbedding, name(chunks[0][0]))

	par.VirtualStages, par.AccountForEmbedding = 2, false
	require.NotEmpty(t, layout(c, par).Check(), "8 chunks of 6 layers without the accounting")
}

// Context parallelism: the cp ranks of a replica (Megatron's order
// tp-cp-dp-pp, folded into the data-parallel index) each hold 1/cp of the
// sequence and share its micro-batches; the step's model FLOPs and tokens
// are those of the same step without it (the balanced chunks give every
// rank 1/cp of the causal attention); each layer's forward gathers the
// other ranks' keys and values over its context-parallel group, on the cp
// stream, while the attention computes, and what follows the attention
// waits for both; the gradients are reduced over dp·cp. What cannot be
// split names cp.
func TestContextParallel(t *testing.T) {
	c, ok := model.FromPreset("llama3-8b", model.Config{Layers: 2})
	require.True(t, ok)
	step := func(par Parallel) (*TrainingPlan, Training) {
		tr := layout(c, par)
		tr.SeqLen, tr.DType, tr.UnfusedAttention = 8192, hw.BF16, false
		require.Empty(t, tr.Check())
		p, err := BuildTraining(tr)
		require.NoError(t, err)
		return p, tr
	}
	plain, _ := step(Parallel{TP: 2, PP: 1, DP: 4, MicroBatch: 1, GlobalBatch: 8})
	cp, tr := step(Parallel{TP: 2, PP: 1, DP: 4, CP: 2, MicroBatch: 1, GlobalBatch: 8})
	require.Equal(t, 4, tr.MicroBatches(), "two replicas of two context-parallel ranks share 8 sequences")
	require.Equal(t, plain.Tokens, cp.Tokens)
	require.InEpsilon(t, plain.ModelFLOPs, cp.ModelFLOPs, 1e-3)
	require.Less(t, cp.Memory[0].Activations, plain.Memory[0].Activations)

	// Context-parallel groups: units 0 and 1 (ranks 0-1 and 2-3), 2 and 3.
	var groups [][]int
	seen := map[int]bool{}
	for _, u := range cp.Units {
		if g := u.Groups[SlotCP]; g >= 0 && !seen[g] {
			seen[g] = true
			groups = append(groups, cp.Groups[g].Comms[0])
		}
	}
	require.Equal(t, [][]int{{0, 2}, {4, 6}}, groups)
	require.Len(t, cp.Groups[cp.Units[0].Groups[SlotDP]].Units, 4, "gradients over dp·cp")

	// The exchange: an all-gather of the keys and values of the whole
	// sequence forward (8,192 tokens of 2·(8/2)·128 elements in bf16).
	prog := cp.Programs[0]
	kvBytes := float64(8192 * 2 * 4 * 128 * 2)
	var gathers, scatters int
	for i, task := range prog.Tasks {
		if task.Stream != StreamCP {
			continue
		}
		require.Equal(t, SlotCP, task.Slot)
		require.Equal(t, kvBytes, task.Bytes)
		switch task.Coll {
		case model.AllGather:
			gathers++
		case model.ReduceScatter:
			scatters++
		}
		// The attention after it runs alongside; the next task waits for it.
		var attn, joined int32 = -1, -1
		for j := i + 1; j < len(prog.Tasks); j++ {
			if prog.Tasks[j].Kind != Compute {
				continue
			}
			if attn < 0 {
				attn = int32(j)
				require.NotContains(t, prog.Tasks[j].Deps, int32(i))
				continue
			}
			if slices.Contains(prog.Tasks[j].Deps, int32(i)) {
				joined = int32(j)
			}
			break
		}
		require.Contains(t, prog.Tasks[attn].Name, "attn.flash")
		require.Positive(t, joined, "the task after %s waits for the exchange", prog.Tasks[attn].Name)
	}
	m := tr.MicroBatches()
	require.Equal(t, 2*2*m, gathers, "forward and backward, two layers, every micro-batch")
	require.Equal(t, 2*m, scatters)

	bad := func(par Parallel, seq int) []string {
		tr := layout(c, par)
		tr.SeqLen, tr.UnfusedAttention = seq, false
		var out []string
		for _, p := range tr.Check() {
			out = append(out, p.Path)
		}
		return out
	}
	require.Contains(t, bad(Parallel{TP: 2, PP: 1, DP: 4, CP: 3, MicroBatch: 1, GlobalBatch: 8}, 8192), "cp", "3 does not divide dp·cp")
	require.Contains(t, bad(Parallel{TP: 2, PP: 1, DP: 4, CP: 4, MicroBatch: 1, GlobalBatch: 8}, 8196), "cp", "8196 is not 8 chunks")
	un := layout(c, Parallel{TP: 1, PP: 1, DP: 2, CP: 2, MicroBatch: 1, GlobalBatch: 2})
	require.Equal(t, "cp", un.Check()[0].Path, "unfused attention has no ring attention")
}

// Megatron-Core's uneven split: the first and last stages hold the layers
// given, the middle stages equal shares of the rest, each stage's layers
// spread evenly over its virtual stages (chunk c on stage c mod pp); the
// embedding stays in the first chunk and the LM head in the last. What
// Megatron-Core refuses is a problem naming the field.
func TestUnevenPipelineSplit(t *testing.T) {
	c, ok := model.FromPreset("llama2-7b", model.Config{})
	require.True(t, ok)
	layersPerChunk := func(par Parallel) []int {
		tr := layout(c, par)
		require.Empty(t, tr.Check())
		g, err := model.Build(c, tr.microRun())
		require.NoError(t, err)
		chunks := tr.Par.chunks(g)
		require.Equal(t, model.BlockEmbedding, g.Blocks[chunks[0][0]].Name)
		last := chunks[len(chunks)-1]
		require.Equal(t, model.BlockLMHead, g.Blocks[last[len(last)-1]].Name)
		var per []int
		for _, ch := range chunks {
			n := 0
			for _, bi := range ch {
				if b := g.Blocks[bi].Name; b != model.BlockEmbedding && b != model.BlockLMHead {
					n++
				}
			}
			per = append(per, n)
		}
		return per
	}
	par := Parallel{TP: 1, PP: 4, DP: 1, MicroBatch: 1, GlobalBatch: 8, FirstStageLayers: 6, LastStageLayers: 6}
	require.Equal(t, []int{6, 10, 10, 6}, layersPerChunk(par))
	par.Schedule, par.VirtualStages = Interleaved, 2
	require.Equal(t, []int{3, 5, 5, 3, 3, 5, 5, 3}, layersPerChunk(par))
	par.Schedule, par.VirtualStages, par.FirstStageLayers, par.LastStageLayers = OneFOneB, 1, 0, 5
	require.Equal(t, []int{9, 9, 9, 5}, layersPerChunk(par), "27 layers over the three stages before the last")

	fields := func(par Parallel) (out []string) {
		for _, p := range layout(c, par).Check() {
			out = append(out, p.Path)
		}
		return out
	}
	base := Parallel{TP: 1, PP: 4, DP: 1, MicroBatch: 1, GlobalBatch: 8}
	for _, tc := range []struct {
		edit  func(*Parallel)
		field string
	}{
		{func(p *Parallel) { p.PP, p.FirstStageLayers = 1, 4 }, "pp"},
		{func(p *Parallel) { p.FirstStageLayers, p.AccountForLoss = 4, true }, "decoder_first_pipeline_num_layers"},
		{func(p *Parallel) { p.FirstStageLayers = -1 }, "decoder_first_pipeline_num_layers"},
		{func(p *Parallel) { p.Schedule, p.VirtualStages, p.LastStageLayers = Interleaved, 2, 5 }, "decoder_last_pipeline_num_layers"},
		{func(p *Parallel) { p.FirstStageLayers, p.LastStageLayers = 5, 6 }, "decoder_first_pipeline_num_layers"},   // 21 over 2
		{func(p *Parallel) { p.FirstStageLayers, p.LastStageLayers = 20, 12 }, "decoder_first_pipeline_num_layers"}, // none for 2 stages
		{func(p *Parallel) { p.PP, p.FirstStageLayers, p.LastStageLayers = 2, 10, 10 }, "decoder_first_pipeline_num_layers"},
	} {
		p := base
		tc.edit(&p)
		require.Contains(t, fields(p), tc.field, "%+v", p)
	}
	two := base
	two.PP, two.FirstStageLayers, two.LastStageLayers = 2, 20, 12
	require.Equal(t, []int{20, 12}, layersPerChunk(two))

	// A pipeline layout places the layers as written, chunk c on stage
	// c mod pp: here the uneven split above, and one Megatron-Core's
	// splits cannot express (the first stage's chunks unequal).
	written := base
	written.Layout = "Et*6|t*10|t*10|t*6L"
	require.Equal(t, []int{6, 10, 10, 6}, layersPerChunk(written))
	written.Schedule, written.VirtualStages, written.Layout = Interleaved, 2, "Et|t*5|t*5|t*3|t*5|t*5|t*5|t*3L"
	require.Equal(t, []int{1, 5, 5, 3, 5, 5, 5, 3}, layersPerChunk(written))
	for _, tc := range []struct {
		edit  func(*Parallel)
		field string
	}{
		{func(p *Parallel) { p.Layout = "Et*8|t*8|t*8|t*7L" }, "pipeline_model_parallel_layout"}, // 31 of 32 layers
		{func(p *Parallel) { p.Layout = "Et*8|t*8|t*8|t*7|tL" }, "pipeline_model_parallel_layout"},
		{func(p *Parallel) { p.Layout, p.AccountForLoss = "Et*8|t*8|t*8|t*8L", true }, "pipeline_model_parallel_layout"},
		{func(p *Parallel) { p.Layout = "t*8|Et*8|t*8|t*8L" }, "pipeline_model_parallel_layout"},
		{func(p *Parallel) { p.Layout = "Et*8|t*8|mt*8|t*8L" }, "pipeline_model_parallel_layout"},
		{func(p *Parallel) { p.Layout = "Et*16||t*16|L" }, "pipeline_model_parallel_layout"},
		{func(p *Parallel) { p.Layout = "Et*4|t*4|t*4|t*4|t*4|t*4|t*4|t*4L" }, "virtual_stages"},
	} {
		p := base
		tc.edit(&p)
		require.Contains(t, fields(p), tc.field, "%+v", p)
	}
}

// With overlapped parameter gathering the distributed optimizer's weight
// all-gather runs at the start of the step in buckets, each layer's first
// forward waiting for its own, instead of after the optimizer: the buckets
// carry every dense weight once (16 bits) and nothing is gathered at the
// end.
func TestParamGatherBuckets(t *testing.T) {
	c, ok := model.FromPreset("llama2-7b", model.Config{Layers: 4})
	require.True(t, ok)
	tr := layout(c, Parallel{TP: 1, PP: 1, DP: 8, MicroBatch: 1, GlobalBatch: 16, ZeRO: 1,
		OverlapGradReduce: true, OverlapParamGather: true, BucketParams: 100_000_000})
	tr.SeqLen, tr.DType = 512, hw.BF16
	plan, err := BuildTraining(tr)
	require.NoError(t, err)
	p := plan.Programs[0]
	var bytes float64
	gathers := map[int32]bool{}
	optimizer := p.Marks["optimizer"]
	for i, task := range p.Tasks {
		if task.Coll != model.AllGather || task.Stream != StreamDP {
			continue
		}
		assert.Less(t, int32(i), optimizer, "gathered before the step's compute, not after its optimizer: %s", task.Name)
		assert.Empty(t, task.Deps)
		bytes += task.Bytes
		gathers[int32(i)] = true
	}
	assert.InDelta(t, float64(plan.StageParams[0])*2, bytes, 1)
	// 4 layers of 202M parameters (a bucket each), the embedding and the
	// head in buckets of their own: every first-micro-batch forward waits
	// for a gather, the second micro-batch's for none.
	assert.GreaterOrEqual(t, len(gathers), 4)
	waits := map[int32]int{}
	for _, task := range p.Tasks {
		if task.Kind != Compute {
			continue
		}
		for _, d := range task.Deps {
			if gathers[d] {
				waits[task.MicroBatch]++
			}
		}
	}
	assert.GreaterOrEqual(t, waits[0], len(gathers))
	assert.Zero(t, waits[1])
}

// A training plan's build polls Canceled as it goes and stops with its
// error: a step of thousands of micro-batches takes seconds to build.
func TestBuildTrainingStopsWhenCanceled(t *testing.T) {
	stop := fmt.Errorf("canceled")
	polls := 0
	tr := layout(gpt(t, "gpt-22b"), Parallel{TP: 8, PP: 1, DP: 1, GlobalBatch: 4096, MicroBatch: 1})
	tr.Canceled = func() error {
		if polls++; polls == 3 {
			return stop
		}
		return nil
	}
	_, err := BuildTraining(tr)
	require.ErrorIs(t, err, stop)
	require.Equal(t, 3, polls)
}

// The task list is reserved once from the first passes' sizes: its
// capacity is at least its length and within 10 % above it (append's
// growth would leave up to 25 %).
func TestTrainingTaskListReservedOnce(t *testing.T) {
	for _, par := range []Parallel{
		{TP: 8, PP: 1, DP: 1, GlobalBatch: 512, MicroBatch: 1},
		{TP: 2, PP: 4, DP: 1, GlobalBatch: 512, MicroBatch: 1},
		{TP: 2, PP: 4, DP: 1, GlobalBatch: 512, MicroBatch: 1, VirtualStages: 2, Schedule: Interleaved},
	} {
		p, err := BuildTraining(layout(gpt(t, "gpt-22b"), par))
		require.NoError(t, err)
		prog := p.Programs[0]
		n := len(prog.Tasks)
		require.GreaterOrEqual(t, cap(prog.Tasks), n, "%+v", par)
		require.LessOrEqual(t, float64(cap(prog.Tasks)), float64(n)*1.1, "%+v: capacity %d for %d tasks", par, cap(prog.Tasks), n)
	}
}

// Without gradient-accumulation fusion (Megatron-LM's
// --no-gradient-accumulation-fusion) the weight-gradient GEMMs write their
// gradient once in the math's type, while the gradients are still reduced
// in GradDType: the model run drops the buffer type, the reduction's bytes
// do not move.
func TestNoGradAccumulationFusion(t *testing.T) {
	c, ok := model.FromPreset("llama2-7b", model.Config{Layers: 2})
	require.True(t, ok)
	par := Parallel{TP: 1, PP: 1, DP: 2, MicroBatch: 1, GlobalBatch: 2}
	step := func(off bool) (model.Run, float64) {
		tr := layout(c, par)
		tr.SeqLen, tr.DType, tr.GradDType, tr.NoGradAccumulationFusion = 512, hw.BF16, hw.FP32, off
		require.Empty(t, tr.Check())
		plan, err := BuildTraining(tr)
		require.NoError(t, err)
		var reduced float64
		for _, task := range plan.Programs[plan.Units[0].Program].Tasks {
			if strings.HasPrefix(task.Name, "grad_") {
				reduced += task.Bytes
			}
		}
		return tr.microRun(), reduced
	}
	fused, fusedBytes := step(false)
	plain, plainBytes := step(true)
	require.Equal(t, hw.FP32, fused.GradDType)
	require.Equal(t, hw.DType(""), plain.GradDType)
	require.Positive(t, fusedBytes)
	require.Equal(t, fusedBytes, plainBytes)
}
