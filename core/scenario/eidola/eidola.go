// Package eidola is the "eidola" scenario: one GPU simulated in detail
// running a fused compute-communication kernel, every other GPU a ghost that
// replays a script of its writes (Eidola, arXiv 2606.12638), under three ways
// of waiting for flags (spin-wait, spin-yield, SyncMon) and injected delays.
package eidola

import (
	"context"
	"fmt"

	"github.com/eidolon-sim/eidolon/core/compile"
	"github.com/eidolon-sim/eidolon/core/eidola"
	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/eidolon-sim/eidolon/core/rng"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/spec"
)

// SummaryRow is one kernel run: one sync mode, one injected delay, one replica.
type SummaryRow struct {
	// Mode: spin_wait, spin_yield or syncmon.
	Mode string `arrow:"mode"`
	// InjectedDelayS added to the delayed ghosts' writes.
	InjectedDelayS float64 `arrow:"injected_delay_s"`
	// Replica index (0..seeds-1) and the seed its draws used.
	Replica int    `arrow:"replica"`
	Seed    uint64 `arrow:"seed"`
	// KernelTimeS from launch to the last CTA's end on the detailed GPU.
	KernelTimeS float64 `arrow:"kernel_time_s"`
	// PollingReads are flag reads; MemoryReads adds the tiles' L2 read
	// sectors (32 B each).
	PollingReads int64 `arrow:"polling_reads"`
	MemoryReads  int64 `arrow:"memory_reads"`
	// SMIdleFraction is the share of SM slot-time not spent computing.
	SMIdleFraction float64 `arrow:"sm_idle_fraction"`
	// WaitSTotal is the summed wait of all CTAs.
	WaitSTotal float64 `arrow:"wait_s_total"`
	// Ghosts, CTAs and ScriptRows size the run; Events is the simulator's work.
	Ghosts     int    `arrow:"ghosts"`
	CTAs       int    `arrow:"ctas"`
	ScriptRows int    `arrow:"script_rows"`
	Events     uint64 `arrow:"events"`
}

// CTARow is one CTA of one kernel run.
type CTARow struct {
	Mode           string  `arrow:"mode"`
	InjectedDelayS float64 `arrow:"injected_delay_s"`
	Replica        int     `arrow:"replica"`
	// CTA is the launch index; Kind is gemm, reduce or copy; SM its SM.
	CTA  int    `arrow:"cta"`
	Kind string `arrow:"kind"`
	SM   int    `arrow:"sm"`
	// Flags waited for; Polls are the flag reads issued.
	Flags int   `arrow:"flags"`
	Polls int64 `arrow:"polls"`
	// StartS launch on the SM; WaitS until the last flag was seen;
	// ComputeS from then to EndS. Seconds from kernel launch.
	StartS   float64 `arrow:"start_s"`
	WaitS    float64 `arrow:"wait_s"`
	ComputeS float64 `arrow:"compute_s"`
	EndS     float64 `arrow:"end_s"`
}

// ScriptRow is one ghost write replayed into the detailed GPU. The last four
// columns are the script format: a table of them passed back as the spec's
// "script" (script_source "table") replays the same run.
type ScriptRow struct {
	InjectedDelayS float64 `arrow:"injected_delay_s"`
	Replica        int     `arrow:"replica"`
	// TimeS the flag is visible, seconds after kernel launch.
	TimeS float64 `arrow:"time_s"`
	// SourceGPU is the ghost (1..ghosts) that wrote.
	SourceGPU int `arrow:"source_gpu"`
	// Chunk id in the kernel's numbering (see core/eidola.Arrival).
	Chunk int     `arrow:"chunk"`
	Bytes float64 `arrow:"bytes"`
}

// SetupRow describes the set-up run (script_source "setup_run"): the whole
// group simulated, every GPU detailed, on the flow-level network.
type SetupRow struct {
	// Mode the GPUs of the set-up run used (the first of sync_modes).
	Mode string `arrow:"mode"`
	GPUs int    `arrow:"gpus"`
	// Flows is the number of network transfers.
	Flows int `arrow:"flows"`
	// DetailedKernelTimeS is GPU 0's kernel time in the full run; replaying
	// the recorded script with the same mode and no delay reproduces it.
	DetailedKernelTimeS float64 `arrow:"detailed_kernel_time_s"`
	// MaxKernelTimeS over all GPUs.
	MaxKernelTimeS float64 `arrow:"max_kernel_time_s"`
	Events         uint64  `arrow:"events"`
}

// Kind registers the scenario.
func Kind() scenario.Kind {
	return scenario.Checked(scenario.Define("eidola",
		"one GPU in detail running a fused kernel, peers as ghost scripts; spin-wait vs SyncMon",
		func(env scenario.Env, s *spec.Eidola) (scenario.Result, error) {
			return Run(env, s, computeCosts)
		}), check)
}

// check compiles the set-up run's cluster (names, links, the group's size)
// without running it, so validate() rejects what run() would.
func check(s *spec.Eidola) error {
	if s.ScriptSource != "setup_run" {
		return nil
	}
	_, err := network(s)
	return err
}

// Run simulates a validated spec; costs prices the CTAs' work on a GPU.
func Run(env scenario.Env, s *spec.Eidola, costs func(hw.GPU) eidola.CostModel) (scenario.Result, error) {
	ctx := env.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	gpu, err := compile.GPU("", s.GPU)
	if err != nil {
		return scenario.Result{}, err
	}
	k, err := eidola.Build(KernelConfig(s), costs(gpu))
	if err != nil {
		return scenario.Result{}, err
	}
	cfg := func(mode string) eidola.Config {
		return eidola.Config{GPU: gpu, CTAsPerSM: s.CTAsPerSM, Mode: eidola.SyncMode(mode),
			PollIntervalS: s.PollIntervalS, BackoffMaxS: s.BackoffMaxS, WakeLatencyS: s.WakeLatencyS,
			ReadLatencyCycles: int64(s.FlagReadLatencyCycles)}
	}
	var res scenario.Result
	base, setup, err := baseScript(ctx, s, k, cfg(s.SyncModes[0]))
	if err != nil {
		return res, err
	}
	delayed := delayedSet(s)
	var sums []SummaryRow
	var ctas []CTARow
	var script []ScriptRow
	total := float64(len(s.InjectedDelaysS) * s.Seeds * len(s.SyncModes))
	done := 0.0
	for _, d := range s.InjectedDelaysS {
		for r := 0; r < s.Seeds; r++ {
			seed := rng.Mix(s.Seed, uint64(r))
			arr := eidola.Perturbation{DelayS: d, Delayed: delayed, SkewS: s.SkewS, JitterS: s.JitterS,
				StragglerProbability: s.StragglerProbability, StragglerDelayS: s.StragglerDelayS,
				Seed: seed}.Apply(base, k.Config.GPUs)
			for _, a := range arr {
				script = append(script, ScriptRow{InjectedDelayS: d, Replica: r, TimeS: a.TimeS,
					SourceGPU: a.SourceGPU, Chunk: a.Chunk, Bytes: a.Bytes})
			}
			for _, mode := range s.SyncModes {
				if err := env.Canceled(); err != nil {
					return res, err
				}
				out, err := eidola.Simulate(ctx, k, cfg(mode), arr)
				if err != nil {
					return res, err
				}
				sum := SummaryRow{Mode: mode, InjectedDelayS: d, Replica: r, Seed: seed,
					KernelTimeS: out.KernelTimeS, PollingReads: out.PollingReads, MemoryReads: out.MemoryReads,
					SMIdleFraction: out.SMIdleFraction, Ghosts: s.Ghosts, CTAs: len(out.CTAs),
					ScriptRows: len(arr), Events: out.Events}
				for i, c := range out.CTAs {
					sum.WaitSTotal += c.WaitS
					ctas = append(ctas, CTARow{Mode: mode, InjectedDelayS: d, Replica: r, CTA: i,
						Kind: string(c.Kind), SM: c.Slot / s.CTAsPerSM, Flags: c.Flags, Polls: c.Polls,
						StartS: c.StartS, WaitS: c.WaitS, ComputeS: c.ComputeS, EndS: c.EndS})
				}
				sums = append(sums, sum)
				done++
				env.Report(done / total)
			}
		}
	}
	res.Add("summary", sums)
	res.Add("ctas", ctas)
	res.Add("script", script)
	if setup != nil {
		res.Add("setup", setup)
	}
	return res, nil
}

// KernelConfig is the kernel a spec describes.
func KernelConfig(s *spec.Eidola) eidola.KernelConfig {
	return eidola.KernelConfig{Kind: eidola.KernelKind(s.Kernel), M: s.GEMM.M, N: s.GEMM.N, K: s.GEMM.K,
		TileM: s.Tile.M, TileN: s.Tile.N, DType: hw.DType(s.DType), GPUs: s.Ghosts + 1}
}

func delayedSet(s *spec.Eidola) func(int) bool {
	if len(s.DelayedGhosts) == 0 {
		return nil
	}
	set := make(map[int]bool, len(s.DelayedGhosts))
	for _, g := range s.DelayedGhosts {
		set[g] = true
	}
	return func(g int) bool { return set[g] }
}

// baseScript is the unperturbed script from the chosen source.
func baseScript(ctx context.Context, s *spec.Eidola, k *eidola.Kernel, c eidola.Config) ([]eidola.Arrival, []SetupRow, error) {
	switch s.ScriptSource {
	case "table":
		out := make([]eidola.Arrival, len(s.Script))
		for i, r := range s.Script {
			out[i] = eidola.Arrival{TimeS: r.TimeS, SourceGPU: r.SourceGPU, Chunk: r.Chunk, Bytes: r.Bytes}
		}
		if _, err := k.ArrivalTimes(out); err != nil {
			return nil, nil, &spec.Error{Problems: []spec.Problem{{Path: "script", Message: err.Error()}}}
		}
		eidola.SortArrivals(out)
		return out, nil, nil
	case "generator":
		return eidola.Generator{StartS: s.Generator.StartS, IntervalS: s.Generator.IntervalS}.Script(k), nil, nil
	}
	fab, err := network(s)
	if err != nil {
		return nil, nil, err
	}
	full, err := eidola.FullRun(ctx, k, c, fab)
	if err != nil {
		return nil, nil, fmt.Errorf("set-up run: %w", err)
	}
	row := SetupRow{Mode: string(c.Mode), GPUs: k.Config.GPUs, Flows: full.Flows,
		DetailedKernelTimeS: full.GPU0.KernelTimeS, Events: fab.Kernel().Events()}
	for _, t := range full.KernelTimesS {
		row.MaxKernelTimeS = max(row.MaxKernelTimeS, t)
	}
	return full.Script, []SetupRow{row}, nil
}

// network builds the set-up run's flow-level network over the cluster's
// first ghosts+1 ranks.
func network(s *spec.Eidola) (net.Fabric, error) {
	t, err := compile.Topology("", s.Cluster)
	if err != nil {
		return nil, err
	}
	n := s.Ghosts + 1
	if t.NumRanks() < n {
		return nil, &spec.Error{Problems: []spec.Problem{{Path: "cluster",
			Message: fmt.Sprintf("has %d GPUs, the group needs ghosts+1 = %d", t.NumRanks(), n)}}}
	}
	if err := t.SetRanks(t.Ranks()[:n]); err != nil {
		return nil, err
	}
	return net.NewFlowNet(sim.New(), t), nil
}
