package spec

import "github.com/eidolon-sim/eidolon/core/hw"

// Eidola is the "eidola" kind: one GPU simulated in detail running a fused
// compute-communication kernel while every other GPU is a ghost replaying a
// script of its writes into it (Eidola, arXiv 2606.12638); compares
// spin-wait, spin-yield and a SyncMon-style monitor under injected delays.
type Eidola struct {
	Header
	// GPU of the detailed GPU (and, in a set-up run, of every GPU): a
	// preset name or a preset with figures changed (see GPU); default
	// "h100-sxm".
	GPU GPU `json:"gpu,omitzero"`
	// Kernel: "allgather_gemm" (default), "gemm_reducescatter", "allreduce".
	Kernel string `json:"kernel,omitempty"`
	// GEMM is the detailed GPU's local problem (M×K)·(K×N); the all-reduce
	// reduces an M×N buffer and ignores K. Default 8192×4096×4096.
	GEMM EidolaGEMM `json:"gemm,omitempty"`
	// Tile is the output tile of one CTA; default 128×256.
	Tile EidolaTile `json:"tile,omitempty"`
	// DType of the operands; default "bf16".
	DType string `json:"dtype,omitempty"`
	// Ghosts is the number of other GPUs (group size ghosts+1); default 7.
	Ghosts int `json:"ghosts,omitempty"`
	// CTAsPerSM is the kernel's occupancy; default 1.
	CTAsPerSM int `json:"ctas_per_sm,omitempty"`

	// ScriptSource: "setup_run" (default: a full flow-level run of the group
	// on Cluster records the writes into the detailed GPU), "table" (Script
	// below), or "generator" (Generator below).
	ScriptSource string `json:"script_source,omitempty"`
	// Cluster of the set-up run; its first ghosts+1 ranks form the group
	// (rank 0 is the detailed GPU). Default: ghosts+1 GPUs on one switch
	// over "nvlink4" (an NVSwitch domain).
	Cluster Cluster `json:"cluster,omitempty"`
	// Script rows, for script_source "table": the columns of the "script"
	// result table (time_s, source_gpu, chunk, bytes).
	Script []EidolaArrival `json:"script,omitempty"`
	// Generator, for script_source "generator".
	Generator EidolaGenerator `json:"generator,omitempty"`

	// SyncModes to compare: "spin_wait", "spin_yield", "syncmon"; default all.
	SyncModes []string `json:"sync_modes,omitempty"`
	// PollIntervalS between spin-wait polls, and the first spin-yield
	// back-off; default 100e-9 (a poll loop issues its next read about one
	// L2 round trip after the last); at most 1e-3.
	PollIntervalS float64 `json:"poll_interval_s,omitempty"`
	// BackoffMaxS caps the spin-yield back-off; default 32 poll intervals, at most 32e-3.
	BackoffMaxS float64 `json:"backoff_max_s,omitempty"`
	// WakeLatencyS from a flag write to the SyncMon waiter running again;
	// default 250e-9 (estimate: a message from the L2 monitor to the SM and
	// the CTA rescheduled, about one L2 round trip); at most 1e-3.
	WakeLatencyS float64 `json:"wake_latency_s,omitempty"`
	// FlagReadLatencyCycles is one flag read (an L2 hit); default 260
	// (estimate: L2 hit latencies of 220–340 cycles measured on Ada/Hopper
	// parts, e.g. NVIDIA L40 in arXiv 2606.22588).
	FlagReadLatencyCycles int `json:"flag_read_latency_cycles,omitempty"`

	// InjectedDelaysS: each value is one run with every row of the delayed
	// ghosts shifted later by it; default [0]. Every duration of this kind
	// (delays, jitter, skew, script times) is in [0, 1e6] s (MaxDurationS).
	InjectedDelaysS []float64 `json:"injected_delays_s,omitempty"`
	// DelayedGhosts are the ghosts (1..ghosts) the delay applies to; default all.
	DelayedGhosts []int `json:"delayed_ghosts,omitempty"`
	// JitterS: every row is shifted by U[0, jitter_s), drawn per seed.
	JitterS float64 `json:"jitter_s,omitempty"`
	// SkewS: every ghost is shifted by U[0, skew_s), drawn per seed.
	SkewS float64 `json:"skew_s,omitempty"`
	// StragglerProbability that a ghost is a straggler, shifted by
	// StragglerDelayS, drawn per seed.
	StragglerProbability float64 `json:"straggler_probability,omitempty"`
	StragglerDelayS      float64 `json:"straggler_delay_s,omitempty"`
	// Seeds is the number of replicas per delay, each with its own draws
	// (replica r uses seed Mix(seed, r)); default 1.
	Seeds int `json:"seeds,omitempty"`
}

// EidolaGEMM is a GEMM shape.
type EidolaGEMM struct {
	M int `json:"m"`
	N int `json:"n"`
	K int `json:"k,omitempty"`
}

// EidolaTile is a CTA's output tile.
type EidolaTile struct {
	M int `json:"m"`
	N int `json:"n"`
}

// EidolaArrival is one script row: ghost source_gpu's write of `bytes` for
// `chunk` is visible in the detailed GPU from time_s (after kernel launch).
type EidolaArrival struct {
	TimeS     float64 `json:"time_s"`
	SourceGPU int     `json:"source_gpu"`
	Chunk     int     `json:"chunk"`
	Bytes     float64 `json:"bytes,omitempty"`
}

// EidolaGenerator makes a script: ghost g's n-th write lands at
// start_s + n·interval_s (before delays, skew, jitter and stragglers).
type EidolaGenerator struct {
	StartS    float64 `json:"start_s,omitempty"`
	IntervalS float64 `json:"interval_s,omitempty"`
}

// EidolaKernels, EidolaSyncModes, EidolaSources list the allowed names.
func EidolaKernels() []string   { return []string{"allgather_gemm", "gemm_reducescatter", "allreduce"} }
func EidolaSyncModes() []string { return []string{"spin_wait", "spin_yield", "syncmon"} }
func EidolaSources() []string   { return []string{"setup_run", "table", "generator"} }

func (s *Eidola) Defaults() {
	def := func(v *string, d string) {
		if *v == "" {
			*v = d
		}
	}
	defInt := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defF := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	if s.GPU.absent() {
		s.GPU.Preset = "h100-sxm"
	}
	def(&s.Kernel, "allgather_gemm")
	def(&s.DType, "bf16")
	def(&s.ScriptSource, "setup_run")
	if s.GEMM == (EidolaGEMM{}) {
		s.GEMM = EidolaGEMM{M: 8192, N: 4096, K: 4096}
	}
	if s.Tile == (EidolaTile{}) {
		s.Tile = EidolaTile{M: 128, N: 256}
	}
	defInt(&s.Ghosts, 7)
	if s.Cluster.Preset == "" && s.Cluster.Topology == "" {
		s.Cluster.Topology = "switch"
	}
	switch s.Cluster.Topology {
	case "switch", "ring", "fully_connected", "leaf_spine":
		if s.Cluster.GPUs == 0 {
			s.Cluster.GPUs = s.Ghosts + 1
		}
	}
	s.Cluster.Defaults()
	defInt(&s.CTAsPerSM, 1)
	defInt(&s.FlagReadLatencyCycles, 260)
	defInt(&s.Seeds, 1)
	if len(s.SyncModes) == 0 {
		s.SyncModes = EidolaSyncModes()
	}
	defF(&s.PollIntervalS, 100e-9)
	if s.PollIntervalS > 0 {
		defF(&s.BackoffMaxS, 32*s.PollIntervalS)
	}
	defF(&s.WakeLatencyS, 250e-9)
	if len(s.InjectedDelaysS) == 0 {
		s.InjectedDelaysS = []float64{0}
	}
}

// maxGhosts bounds the group; the model itself has no limit, the bound
// keeps a typo from asking for a billion ghosts.
const maxGhosts = 1 << 16

// maxSyncLatencyS bounds poll_interval_s, backoff_max_s and
// wake_latency_s: 1 ms, ten thousand times the defaults (100 ns, 250 ns).
// The synchronization loop is a GPU's, not a timer's; beyond this the poll
// and wake counts stop meaning anything.
const maxSyncLatencyS = 1e-3

// maxSetupGhosts bounds a set-up run, which simulates the whole group.
const maxSetupGhosts = 4095

func (s *Eidola) Validate(p *Problems) {
	gpu, ok := s.GPU.Validate(p, "gpu")
	p.OneOf("kernel", s.Kernel, EidolaKernels())
	if hw.DType(s.DType).Bytes() == 0 {
		names := make([]string, len(hw.DTypes))
		for i, d := range hw.DTypes {
			names[i] = string(d)
		}
		p.OneOf("dtype", s.DType, names)
	} else if ok && gpu.Peak(hw.DType(s.DType)) == 0 {
		p.Addf("dtype", "%s has no %s tensor math", s.GPU, s.DType)
	}
	p.IntInRange("ghosts", s.Ghosts, 1, maxGhosts)
	p.IntInRange("ctas_per_sm", s.CTAsPerSM, 1, 64)
	s.validateShape(p)

	if p.OneOf("script_source", s.ScriptSource, EidolaSources()) {
		switch s.ScriptSource {
		case "table":
			if len(s.Script) == 0 {
				p.Addf("script", "required when script_source is \"table\": rows of time_s, source_gpu, chunk, bytes")
			}
			for i, r := range s.Script {
				at := Index("script", i)
				p.Duration(Field(at, "time_s"), r.TimeS)
				p.IntInRange(Field(at, "source_gpu"), r.SourceGPU, 1, s.Ghosts)
				if r.Chunk < 0 {
					p.Addf(Field(at, "chunk"), "must be >= 0, got %d", r.Chunk)
				}
				p.NonNegative(Field(at, "bytes"), r.Bytes)
			}
		case "generator":
			p.Duration("generator.start_s", s.Generator.StartS)
			p.Duration("generator.interval_s", s.Generator.IntervalS)
		case "setup_run":
			// The set-up run simulates every GPU and, for the all-gather, P·(P-1)
			// flows: 1,024 GPUs take seconds, 4,096 minutes.
			if s.Ghosts > maxSetupGhosts {
				p.Addf("ghosts", "at most %d with script_source \"setup_run\" (it simulates every GPU); use \"generator\" or \"table\" beyond, got %d", maxSetupGhosts, s.Ghosts)
			}
			s.Cluster.Validate(p, "cluster")
		}
	}
	if s.ScriptSource != "table" && len(s.Script) > 0 {
		p.Addf("script", "only used with script_source \"table\", which is %q", s.ScriptSource)
	}

	seen := map[string]bool{}
	for i, m := range s.SyncModes {
		if p.OneOf(Index("sync_modes", i), m, EidolaSyncModes()) && seen[m] {
			p.Addf(Index("sync_modes", i), "%q is listed twice", m)
		}
		seen[m] = true
	}
	p.Positive("poll_interval_s", s.PollIntervalS)
	if s.PollIntervalS > maxSyncLatencyS {
		p.Addf("poll_interval_s", "must be at most %g s (a poll loop, not a timer), got %v", maxSyncLatencyS, s.PollIntervalS)
	}
	if s.BackoffMaxS > 32*maxSyncLatencyS {
		p.Addf("backoff_max_s", "must be at most %g s, got %v", 32*maxSyncLatencyS, s.BackoffMaxS)
	}
	if !(s.BackoffMaxS >= s.PollIntervalS) {
		p.Addf("backoff_max_s", "must be >= poll_interval_s (%v), got %v", s.PollIntervalS, s.BackoffMaxS)
	}
	p.InRange("wake_latency_s", s.WakeLatencyS, 0, maxSyncLatencyS)
	p.IntInRange("flag_read_latency_cycles", s.FlagReadLatencyCycles, 0, 1_000_000)
	for i, d := range s.InjectedDelaysS {
		p.Duration(Index("injected_delays_s", i), d)
	}
	for i, g := range s.DelayedGhosts {
		p.IntInRange(Index("delayed_ghosts", i), g, 1, s.Ghosts)
	}
	p.Duration("jitter_s", s.JitterS)
	p.Duration("skew_s", s.SkewS)
	p.InRange("straggler_probability", s.StragglerProbability, 0, 1)
	p.Duration("straggler_delay_s", s.StragglerDelayS)
	p.IntInRange("seeds", s.Seeds, 1, 100_000)
}

// validateShape checks the divisibility the kernels need: one row block per
// GPU, whole tiles, and (for reduce-scatter and all-reduce) tiles that do
// not straddle two GPUs' blocks.
func (s *Eidola) validateShape(p *Problems) {
	g, t := s.GEMM, s.Tile
	p.IntInRange("gemm.m", g.M, 1, 1<<30)
	p.IntInRange("gemm.n", g.N, 1, 1<<30)
	if s.Kernel != "allreduce" {
		p.IntInRange("gemm.k", g.K, 1, 1<<30)
	}
	p.IntInRange("tile.m", t.M, 1, 1<<20)
	p.IntInRange("tile.n", t.N, 1, 1<<20)
	if g.M < 1 || g.N < 1 || t.M < 1 || t.N < 1 || s.Ghosts < 1 {
		return
	}
	gpus := s.Ghosts + 1
	if g.M%gpus != 0 {
		p.Addf("gemm.m", "must be a multiple of the GPU count ghosts+1 = %d (one row block per GPU), got %d", gpus, g.M)
		return
	}
	if g.N%t.N != 0 {
		p.Addf("tile.n", "must divide gemm.n = %d, got %d", g.N, t.N)
	}
	block := g.M / gpus
	switch {
	case s.Kernel == "allgather_gemm" && g.M%t.M != 0:
		p.Addf("tile.m", "must divide gemm.m = %d, got %d", g.M, t.M)
	case s.Kernel != "allgather_gemm" && block%min(t.M, block) != 0:
		p.Addf("tile.m", "must divide the rows per GPU gemm.m/(ghosts+1) = %d, or exceed them; got %d", block, t.M)
	}
	rows := t.M
	if s.Kernel != "allgather_gemm" {
		rows = min(t.M, block)
	}
	if ctas := int64(g.M/rows) * int64(g.N/t.N); ctas > 1<<22 {
		p.Addf("tile", "gives %d CTAs; at most %d", ctas, 1<<22)
	}
}
