package workload

import "github.com/eidolon-sim/eidolon/core/model"

// MemoryAt is the per-GPU memory, by category, of the stage with the
// largest total for a prompt of `prompt` tokens: the breakdown PeakMemory
// sums, without laying out the decode steps. (Added for the ssm_tp kind.)
func (in Inference) MemoryAt(prompt int) (Memory, error) {
	r := in.run(model.Prefill, 0)
	r.SeqLen = prompt
	g, err := model.Build(in.Model, in.memoryRun(r))
	if err != nil {
		return Memory{}, err
	}
	var peak Memory
	for _, blocks := range chunkPositions(g, in.PP, false, false, nil) {
		if m := in.stageMemory(g, blocks, prompt); m.Total() > peak.Total() {
			peak = m
		}
	}
	return peak, nil
}
