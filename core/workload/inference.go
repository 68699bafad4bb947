package workload

import (
	"fmt"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
)

// Inference is a batch of requests served by identical replicas, each a
// TP×PP group of GPUs: prefill of every prompt, then OutputTokens−1 decode
// steps (the prefill produces the first token).
type Inference struct {
	Model model.Config
	// TP and PP of a replica; Replicas serve independent batches.
	TP, PP, Replicas int
	// Batch is sequences per replica; Prompt and Output tokens per sequence.
	Batch, Prompt, Output int
	DType                 hw.DType
	UnfusedAttention      bool
	// LocalSSMProjections: see model.Run (false: Megatron split as is).
	LocalSSMProjections bool
}

// Rank is the global rank of TP index tp at stage pp of replica r: replicas
// are contiguous blocks of TP·PP ranks.
func (in Inference) Rank(tp, pp, r int) int { return tp + in.TP*(pp+in.PP*r) }

// Ranks is the number of GPUs.
func (in Inference) Ranks() int { return in.TP * in.PP * in.Replicas }

// InferencePlan is an inference run's plan with its memory per stage.
type InferencePlan struct {
	*Plan
	Memory []Memory
	// Marks on every program: "prefill_end" (the stage's last prefill task)
	// and "end".
}

// Check returns every problem with the spec field it concerns.
func (in Inference) Check() []model.FieldProblem {
	var ps []model.FieldProblem
	for _, r := range []model.Run{in.run(model.Prefill, 0), in.run(model.Decode, in.Prompt)} {
		for _, fp := range in.Model.CheckRun(r) {
			field := fp.Field
			switch field {
			case "tp", "batch":
			case "seq_len":
				field = "prompt_tokens"
			default:
				field = "model." + field
			}
			ps = append(ps, model.FieldProblem{Field: field, Message: fp.Message})
		}
		if len(ps) > 0 {
			break
		}
	}
	if n := len(in.Model.Pattern); in.PP > n {
		ps = append(ps, model.FieldProblem{Field: "pp", Message: fmt.Sprintf("must not exceed the model's blocks (%d), got %d", n, in.PP)})
	}
	return ps
}

func (in Inference) run(phase model.Phase, kv int) model.Run {
	return model.Run{Phase: phase, Batch: in.Batch, SeqLen: in.Prompt, KVLen: kv, TP: in.TP,
		DType: in.DType, UnfusedAttention: in.UnfusedAttention, LocalSSMProjections: in.LocalSSMProjections}
}

// BuildInference lays out an inference run. in must pass Check.
func BuildInference(in Inference) (*InferencePlan, error) {
	if ps := in.Check(); len(ps) > 0 {
		return nil, fmt.Errorf("%s: %s", ps[0].Field, ps[0].Message)
	}
	prefill, err := model.Build(in.Model, in.run(model.Prefill, 0))
	if err != nil {
		return nil, err
	}
	decode := make([]model.Graph, in.Output)
	for k := 1; k < in.Output; k++ {
		if decode[k], err = model.Build(in.Model, in.run(model.Decode, in.Prompt+k-1)); err != nil {
			return nil, err
		}
	}
	P, T := in.PP, in.TP
	chunks := chunkPositions(prefill.Order, P)
	ip := &InferencePlan{Plan: &Plan{Ranks: in.Ranks()}}
	e := max(in.DType.Bytes(), 2)
	for s := 0; s < P; s++ {
		b := &progBuilder{p: &Program{Name: fmt.Sprintf("stage%d", s), Marks: map[string]int32{}}}
		pass := func(g model.Graph, step int, tokens int) {
			pre := "prefill."
			if step > 0 {
				pre = fmt.Sprintf("decode%d.", step)
			}
			act := float64(in.Batch*tokens*in.Model.Hidden) * e
			msg, gather := act, false
			if T > 1 {
				msg, gather = act/float64(T), true
			}
			last := int32(-1)
			if s > 0 {
				last = b.p2p(pre+"recv_activations", Recv, SlotFwdIn, int32(step), msg, int32(step))
				if gather {
					last = b.collective(pre+"pp.all_gather", StreamTP, SlotTP, model.AllGather, act, int32(step), last)
				}
			} else if step > 0 && P > 1 {
				// The last stage's sampled token ids come back to stage 0.
				last = b.p2p(pre+"recv_tokens", Recv, SlotFwdIn, int32(step), float64(4*in.Batch), int32(step))
			}
			for _, bi := range chunks[s] {
				if r := b.ops(pre, g.Blocks[bi].Forward, int32(step), deps(last), false); r >= 0 {
					last = r
				}
			}
			if s < P-1 {
				b.p2pAfter(pre+"send_activations", Send, SlotFwdOut, int32(step), msg, int32(step), last)
			} else if P > 1 && step+1 < in.Output {
				b.p2pAfter(pre+"send_tokens", Send, SlotFwdOut, int32(step+1), float64(4*in.Batch), int32(step), last)
			}
			if step == 0 {
				b.p.Marks["prefill_end"] = last
			}
			b.p.Marks["end"] = last
		}
		pass(prefill, 0, in.Prompt)
		for k := 1; k < in.Output; k++ {
			pass(decode[k], k, 1)
		}
		ip.Programs = append(ip.Programs, *b.p)
		ip.Memory = append(ip.Memory, in.stageMemory(prefill, chunks[s], in.Prompt))
	}
	in.layout(ip.Plan)
	return ip, nil
}

// stageMemory is the per-GPU memory of a stage holding blocks for a prompt
// of `prompt` tokens: weights, KV cache and SSM state for prompt + output
// tokens of every sequence, and the largest operator's tensors in prefill.
func (in Inference) stageMemory(g model.Graph, blocks []int, prompt int) Memory {
	c := in.Model
	e := max(in.DType.Bytes(), 2)
	t := float64(in.TP)
	var m Memory
	attn, ssm, ssmTotal := 0, 0, 0
	for _, p := range c.Pattern {
		if p == model.PatSSM {
			ssmTotal++
		}
	}
	seen := map[int]bool{}
	for _, bi := range blocks {
		blk := g.Blocks[bi]
		m.Weights += float64(blk.Params) * e
		if !seen[bi] {
			seen[bi] = true
			m.Weights += float64(blk.SharedParams) * e
		}
		switch blk.Name {
		case model.BlockTransformer, model.BlockShared:
			attn++
		case model.BlockMamba, model.BlockMamba2:
			ssm++
		}
		for _, o := range blk.Forward {
			if !o.IsComm() {
				m.Activations = max(m.Activations, o.Bytes)
			}
		}
	}
	kvHeads := float64(max(c.KVHeads/in.TP, 1))
	tokens := float64(in.Batch * (prompt + in.Output))
	m.KVCache = float64(attn) * 2 * kvHeads * float64(c.HeadDim) * e * tokens
	if ssmTotal > 0 {
		m.SSMState = model.SSMStateBytesPerSeq(c, hw.DType(dtypeOfBytes(e))) / float64(ssmTotal) * float64(ssm) / t * float64(in.Batch)
	}
	return m
}

func dtypeOfBytes(e float64) hw.DType {
	if e >= 4 {
		return hw.FP32
	}
	return hw.BF16
}

// PeakMemory is the largest per-GPU memory over stages for a prompt length.
func (in Inference) PeakMemory(prompt int) (float64, error) {
	r := in.run(model.Prefill, 0)
	r.SeqLen = prompt
	g, err := model.Build(in.Model, r)
	if err != nil {
		return 0, err
	}
	chunks := chunkPositions(g.Order, in.PP)
	peak := 0.0
	for s := range chunks {
		peak = max(peak, in.stageMemory(g, chunks[s], prompt).Total())
	}
	return peak, nil
}

// LongestPrompt is the longest prompt (tokens per sequence, with Output
// tokens generated) whose peak memory fits in capacity bytes per GPU, 0 if
// none does. Memory grows with the prompt, so a bisection finds it.
func (in Inference) LongestPrompt(capacity float64) (int, error) {
	fits := func(p int) (bool, error) {
		m, err := in.PeakMemory(p)
		return m <= capacity, err
	}
	if ok, err := fits(1); err != nil || !ok {
		return 0, err
	}
	lo, hi := 1, 2
	for {
		ok, err := fits(hi)
		if err != nil {
			return 0, err
		}
		if !ok {
			break
		}
		lo = hi
		if hi >= 1<<26 {
			return hi, nil
		}
		hi *= 2
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		ok, err := fits(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// layout creates units (unit r·PP + s) and their groups.
func (in Inference) layout(pl *Plan) {
	P, T, R := in.PP, in.TP, in.Replicas
	for r := 0; r < R; r++ {
		var rep []int
		for s := 0; s < P; s++ {
			u := Unit{Program: s, Replica: r, Stage: s}
			for i := range u.Groups {
				u.Groups[i] = -1
			}
			for k := 0; k < T; k++ {
				u.Ranks = append(u.Ranks, in.Rank(k, s, r))
			}
			pl.Groups = append(pl.Groups, Group{Units: []int{len(pl.Units)}, Comms: [][]int{u.Ranks}})
			u.Groups[SlotTP] = len(pl.Groups) - 1
			rep = append(rep, len(pl.Units))
			pl.Units = append(pl.Units, u)
		}
		pl.Replicas = append(pl.Replicas, rep)
		if P > 1 {
			for s := 0; s < P; s++ {
				pl.link(rep[s], rep[(s+1)%P], SlotFwdOut, SlotFwdIn)
			}
		}
	}
}
