package spec

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/eidolon-sim/eidolon/core/net"
)

// Budget is a run's size estimated from its spec alone, cheaply (closed
// forms over the spec's fields, nothing built), so that a run that would
// exhaust the machine is refused before it starts: Go's out-of-memory is
// fatal to the whole process (a notebook kernel), not an error.
type Budget struct {
	// MemoryBytes is the estimated peak of the run's own allocations.
	MemoryBytes float64
	// Events is the estimated number of simulated events (0 if not known).
	Events float64
	// Fields are the spec fields the estimate grows with, for the message;
	// EventFields, if set, those the events grow with (default Fields).
	Fields, EventFields []string
	// Detail says how the estimate was made.
	Detail string
}

// Budgeted is a spec that can estimate its run's budget.
type Budgeted interface {
	Budget() Budget
}

// DefaultMaxEvents is the events a run may be estimated to simulate when
// its spec sets no max_events: about 45 minutes at the event kernel's
// 3.9 M events/s on a stepped ring of 256 GPUs (1.07 M events in 0.28 s on
// this project's 2-core machine), so a run this long (with its progress bar
// and Ctrl-C) must be asked for. Events price the work only roughly: an
// event among many concurrent flows (a direct all-to-all over 256 GPUs,
// 11 k events/s) costs more.
const DefaultMaxEvents = 1e10

// CheckBudget refuses a spec whose estimated memory exceeds memLimit bytes
// (no limit when memLimit <= 0), or whose estimated events exceed
// eventLimit (DefaultMaxEvents when eventLimit <= 0), naming the fields and
// the estimate.
func CheckBudget(b Budget, memLimit, eventLimit float64) error {
	if eventLimit <= 0 {
		eventLimit = DefaultMaxEvents
	}
	path := ""
	if len(b.Fields) > 0 {
		path = b.Fields[0]
	}
	switch {
	case memLimit > 0 && b.MemoryBytes > memLimit:
		events := ""
		if b.Events > 0 {
			events = fmt.Sprintf(" and about %.3g events", b.Events)
		}
		return &Error{Problems: []Problem{{Path: path, Message: fmt.Sprintf(
			"the run would need about %.3g GiB%s (%s; grows with %s), over the memory limit of %.3g GiB: make it smaller, or raise max_memory_bytes (in the spec, or eidolon.run(..., max_memory_bytes=...))",
			b.MemoryBytes/(1<<30), events, b.Detail, strings.Join(b.Fields, ", "), memLimit/(1<<30))}}}
	case b.Events > eventLimit:
		fields := b.EventFields
		if len(fields) == 0 {
			fields = b.Fields
		}
		if len(fields) > 0 {
			path = fields[0]
		}
		return &Error{Problems: []Problem{{Path: path, Message: fmt.Sprintf(
			"the run would simulate about %.3g events (%s; grows with %s), over the limit of %.3g events: make it smaller, or raise max_events in the spec",
			b.Events, b.Detail, strings.Join(fields, ", "), eventLimit)}}}
	}
	return nil
}

// CheckMemoryCeiling refuses a memory limit above a machine's memory,
// ceiling bytes (0: unknown, nothing refused): the limit is what lets a
// large run start, and one estimated above what the machine has would
// exhaust it and kill the process.
func CheckMemoryCeiling(limit, ceiling float64) error {
	var p Problems
	if ceiling > 0 && limit > ceiling {
		p.Addf("max_memory_bytes", "must not exceed this machine's memory, %.3g bytes (or what its address-space limit leaves): a run estimated above it would exhaust the machine; got %.3g", ceiling, limit)
	}
	return p.Err()
}

// ValidateLimits checks the header's max_memory_bytes and max_events.
func (h *Header) ValidateLimits(p *Problems) {
	if h.MaxMemoryBytes != 0 && (!(h.MaxMemoryBytes > 0) || math.IsInf(h.MaxMemoryBytes, 0)) {
		p.Addf("max_memory_bytes", "must be > 0 bytes (0 or absent: the default limit), got %v", h.MaxMemoryBytes)
	}
	if h.MaxEvents != 0 && (!(h.MaxEvents > 0) || math.IsInf(h.MaxEvents, 0)) {
		p.Addf("max_events", "must be > 0 (0 or absent: the default limit, %g), got %v", float64(DefaultMaxEvents), h.MaxEvents)
	}
}

// Budget of a seedflood run: every client keeps its model (and the gossip
// baselines up to three more copies: parameters, a neighbour average or
// CHOCO's estimate and its error), 8 bytes per float64 parameter, plus the
// data set and its partition. Measured (Go's TotalAlloc, 2 steps, ring of
// 16 and 64 clients, MLP [1000] on 32 features): about 8 bytes per client
// and parameter for seedflood, 24 for dsgd, 29 for choco; 32 here bounds
// them. The data set took about 9 bytes per sample and feature; 16 here.
// Synthetic data drawn in a latent space and mapped to the features also
// hold the latent draw (16 bytes per sample and latent dimension) and the
// map itself (8 bytes per feature and latent dimension), and a source task
// drawn for pre-training is a second data set of its own samples.
func (s *SeedFlood) Budget() Budget {
	d := s.Dataset
	features := float64(max(d.NFeatures, 1))
	classes := float64(max(d.Classes, 2))
	params, in := 0.0, features
	if d.ExactSubspace && d.LatentDim > 0 {
		// Only the first layer's rows the data meet are kept, and the data
		// are drawn in the latent space.
		features = float64(d.LatentDim)
		in = features
	}
	// widths: the floats one row of a forward/backward workspace holds
	// (seedflood.Model.newWorkspace: the input, then each layer's output,
	// its two-point twin and its gradient).
	widths := in
	if s.Model.Kind == "mlp" {
		for _, h := range s.Model.Hidden {
			params += in*float64(h) + float64(h)
			in = float64(h)
			widths += 3 * in
		}
	}
	params += in*classes + classes
	widths += 3 * classes
	// Workspaces alive at once: a method's (a gossip method's and its
	// zeroth-order estimator's: two) at batch_size, the evaluator's at its
	// 256 rows, and pre-training's at its own batch; three at batch_size
	// (measured: two methods of 4,096 rows of 2,048 classes allocate 251 MB,
	// 1.2 times two workspaces' 209).
	rows := 3*float64(s.BatchSize) + 256
	if s.Pretrain.Kind == "source" {
		rows += float64(s.Pretrain.BatchSize)
	}
	samples := float64(d.Samples)
	if d.Kind == "inline" {
		samples = float64(max(len(d.Features), len(d.Labels)))
	}
	clients := float64(max(s.Topology.Clients, s.Topology.Rows*s.Topology.Cols, 1))
	perSample, mapped, latent := features, 0.0, 0.0
	if d.Kind == "synthetic" && d.LatentDim > 0 && !d.ExactSubspace {
		latent = float64(d.LatentDim)
		perSample += latent
		mapped = 8 * features * latent
	}
	if d.Kind == "synthetic" && s.Pretrain.Kind == "source" {
		samples += float64(s.Pretrain.Samples)
	}
	total, fields := largestFirst([]budgetPart{
		{32 * clients * params, []string{"model.hidden", "topology.clients"}},
		{16 * samples * perSample, []string{"dataset.samples", "dataset.n_features"}},
		{mapped, []string{"dataset.latent_dim", "dataset.n_features"}},
		{4 * rows * widths, []string{"batch_size", "dataset.classes", "model.hidden"}},
	})
	detail := fmt.Sprintf("%.3g parameters on each of %.0f clients, %.3g samples of %.0f features", params, clients, samples, features)
	if latent > 0 {
		detail += fmt.Sprintf(" drawn in %.0f latent dimensions", latent)
	}
	return Budget{MemoryBytes: total, Fields: fields, Detail: detail}
}

// budgetPart is a part of a run's memory and the fields it grows with.
type budgetPart struct {
	bytes  float64
	fields []string
}

// largestFirst sums parts and lists their fields, the largest part's
// first, so that a refusal names the field that matters.
func largestFirst(parts []budgetPart) (total float64, fields []string) {
	slices.SortStableFunc(parts, func(a, b budgetPart) int { return cmp.Compare(b.bytes, a.bytes) })
	for _, p := range parts {
		total += p.bytes
		for _, f := range p.fields {
			if !slices.Contains(fields, f) {
				fields = append(fields, f)
			}
		}
	}
	return total, fields
}

// inferenceEventsPerPass is the events of one pass per layer (plus 8 for
// the embedding, head and the step's own tasks): measured (the kernel's
// count, LLaMA-2 7B, 256 and 1,024 output tokens, tp 2, 8 and pp 1, 2)
// 4.1 to 7.7; 16 here.
const inferenceEventsPerPass = 16

// InferenceSegmentSteps is how many steps a long inference run builds and
// runs at a time where its step boundaries are quiescent (core/job's
// RunStepped): its working set is that of one segment, whatever the
// output length.
const InferenceSegmentSteps = 64

// timelineRowBytes is one timeline row with its task's name: measured
// (Go's live heap, LLaMA-2 7B, 16,384 output tokens, the default timeline)
// 125 B; 128 here. A decode step lists about 5 tasks per layer on a rank
// (attention, its all-reduce, the MLP, its all-reduce, the residual).
const (
	timelineRowBytes    = 128
	timelineRowsPerPass = 5
)

// HandOverCopies is how many times a result table's Arrow bytes are held
// at once as they cross to Python: the bundle the Go side encodes, and
// Python's copy of it (core/table.Bundle, python/eidolon/_engine.py). Small
// for most runs; for a long decode's timeline or a long serving run's
// iterations it is the largest part of the memory: a serving run of
// 100,000 requests and 5.9 M engine iterations peaked at 2.66 GB resident,
// 630 MB of it its bundle, against an estimate of 0.84 GB without it.
const HandOverCopies = 2

// Arrow bytes of a row of the tables that grow with a run: a timeline row
// (measured: 349 MB for 3.9 M rows, its names included), a collective's
// flow and link rows, and the serving tables' rows, 8 bytes a column
// (requests 19 columns, iterations 13; TestBudgetRowsMatchTables holds
// these to the row structs).
const (
	timelineRowArrowBytes         = 90
	flowRowArrowBytes             = 96  // measured: 86
	linkRowArrowBytes             = 112 // measured: 108
	collectiveLinkRowsPerGPU      = 8   // measured: 6 on dgx-a100 clusters of 16 and 64 GPUs
	ServingRequestColumns         = 19
	ServingIterationColumns       = 13
	servingRequestRowArrowBytes   = 8 * ServingRequestColumns
	servingIterationRowArrowBytes = 8 * ServingIterationColumns
)

// Budget of an inference run. Measured (Go's TotalAlloc, LLaMA-2 7B at 8
// and 32 layers, 256 to 2,048 output tokens, tp 2 and 8, pp 1 and 2, with
// the default timeline): a plan built whole takes 3.3 to 7 KB per output
// token and layer, garbage included; the heap's peak (its growth with
// GOGC=10) about 2.6 KB at 4,096 tokens; 4 KB here, per layer plus 8 for
// the embedding, head and the step's own tasks. A run in segments
// (segmented) holds one segment of InferenceSegmentSteps steps — measured
// (Go's live heap after a collection, LLaMA-2 7B at 8 and 32 layers, no
// timeline, flat from 1,024 to 16,384 output tokens) 1 to 1.7 KB per pass
// and layer, 2 KB here — and, per output token, only the timeline's rows.
// Under two_batch_overlap a step runs two micro-batches' passes: twice
// the tasks (a DeepSeek-V3 decode with it measured 12 MB live against
// 12.7 MB estimated at one pass a step).
func (s *Inference) Budget() Budget {
	out, groups := s.OutputTokens, 1
	if len(s.Requests) > 0 {
		groups = len(s.Requests)
		out = 0
		for _, r := range s.Requests {
			out = max(out, r.OutputTokens)
		}
	}
	m, ok := s.Model.Resolve()
	layers := 128.0
	if ok && m.Layers > 0 {
		layers = float64(m.Layers)
	}
	steps := float64(groups + max(out, 1) - 1)
	perStep := 1.0 // passes a step runs
	if s.TwoBatchOverlap {
		perStep = 2
	}
	ranks := timelineRanks(s.TimelineRanks, max(s.PP, 1), &s.Faults)
	// The timeline's rows and their hand-over to Python.
	timeline := timelineRowsPerPass * (layers + 8) * steps * ranks * perStep
	handOver := HandOverCopies * timelineRowArrowBytes * timeline
	mem := 4096*perStep*steps*(layers+8) + handOver
	rows := handOver
	detail := fmt.Sprintf("%.0f passes (a decode pass per output token) of %.0f layers", steps, layers)
	if s.segmented(steps) {
		rows += timelineRowBytes * timeline
		mem = perStep*2048*InferenceSegmentSteps*(layers+8) + rows
		detail = fmt.Sprintf("%.0f passes (a decode pass per output token) of %.0f layers, %.0f timeline ranks", steps, layers, ranks)
	}
	fields := []string{"output_tokens", "model.layers"}
	switch {
	case ranks > float64(max(s.PP, 1)):
		fields = withTimelineField(fields, rows, mem-rows)
	case rows > mem-rows:
		// The default timeline is most of a long decode's memory: name
		// the field that drops it ([-1]) after the length.
		fields = append(fields, "timeline_ranks")
	}
	replicas := simulatedReplicas(max(s.Replicas, 1), max(s.TP, 1)*max(s.PP, 1), &s.Faults)
	if s.FullSimulation {
		replicas = float64(max(s.Replicas, 1))
	}
	if replicas > 1 {
		// Replicas simulated beside the first (full_simulation, or faults
		// that break the symmetry mirroring relies on): each further one
		// adds its ranks' task times to the shared plan.
		share := inferenceExtraReplicaShare
		if max(s.TP, 1)*max(s.PP, 1) == 1 {
			share = inferenceExtraReplicaShareAlone
		}
		mem *= 1 + (replicas-1)/share
		cause := "faults"
		if s.FullSimulation {
			cause = "full_simulation"
		}
		fields = append(fields, "replicas", cause)
		detail += fmt.Sprintf(", %.0f replicas simulated", replicas)
	}
	return withCluster(Budget{
		MemoryBytes: mem,
		Events:      inferenceEventsPerPass * perStep * steps * (layers + 8) * replicas,
		Fields:      fields,
		Detail:      detail,
	}, clusterBytesPerGPU, &s.Cluster)
}

// simulatedReplicas is how many of n replicas of gpus GPUs each the
// budget counts as simulated under faults: all where they may break
// mirroring (Faults.EveryReplica), else one and those the faults touch
// (Faults.touchedReplicas).
func simulatedReplicas(n, gpus int, f *Faults) float64 {
	if f.EveryReplica() {
		return float64(n)
	}
	return min(float64(n), 1+f.touchedReplicas(n, gpus))
}

// inferenceExtraReplicaShare: a further replica simulated beside the first
// costs 1/12 of its estimate (1/64 for a replica of one GPU, which has no
// collectives). Measured (peak RSS, 500 output tokens, every replica
// simulated): Llama-3-70B at TP 8, 12.5 MB a further replica against 180
// MB estimated for the first (1/14); Llama-3-8B at TP 4, 5.6 MB against 82
// MB (1/15), at TP 2 about 5 MB (1/17), at TP 1 0.36 MB (1/228).
const (
	inferenceExtraReplicaShare      = 12.0
	inferenceExtraReplicaShareAlone = 64.0
)

// segmented reports whether a run of steps passes runs in segments (see
// core/job's RunStepped: one simulated replica, no fault after time 0);
// where the spec cannot tell cheaply (a fault with several replicas), it
// says no, the larger estimate.
func (s *Inference) segmented(steps float64) bool {
	if steps <= 2*InferenceSegmentSteps+float64(max(len(s.Requests), 1)) {
		return false
	}
	f := s.Faults
	faulted := len(f.Links) > 0 || len(f.Devices) > 0 || len(f.Stragglers) > 0 || f.Sample != nil
	if f.Timed() {
		return false
	}
	return s.Replicas <= 1 || !(faulted || s.FullSimulation)
}

// Budget of an eidola run. Every run (a delay, a replica and a sync mode)
// simulates every CTA of the detailed GPU and keeps a row per CTA, and the
// script table keeps its arrivals: measured (Go's TotalAlloc, generator
// scripts, 8 to 256 GPUs, 3,072 to 786,432 CTA runs) 0.9 to 1.1 KB per CTA
// and run, about 220 B per script row and run (an all-reduce's 47,616
// rows); 1.5 KB and 512 B here. Events: 1.1 or fewer per CTA and run; 2
// here. CTAs and script rows (a generator's or a set-up run's) are the
// kernel's (core/eidola/kernel.go), with B = the tiles of one GPU's row
// block: the all-gather GEMM runs every tile and expects one row block
// from each ghost; the GEMM reduce-scatter adds B reduce CTAs and expects B
// partials from each ghost; the all-reduce runs B reduce and one copy CTA
// per ghost and expects 2B chunks from each.
//
// A set-up run simulates the whole group, P·(P−1) flows for the
// all-gather; the issue that added this measured 4.5 GiB peak at 2,048
// GPUs, about 1.15 KB per flow (1.2 KB here), and about 2 events per flow.
// The cluster is built once, whole (measured: 2 KB a GPU for a switch of
// 65,536, 5.7 KB for 8,192 DGX H100 nodes; clusterBytesPerGPU here).
func (s *Eidola) Budget() Budget {
	p := float64(s.Ghosts + 1)
	ctas, rows := 1.0, p-1
	if s.Tile.M > 0 && s.Tile.N > 0 {
		tm := float64(s.Tile.M)
		if s.Kernel != "allgather_gemm" {
			tm = max(min(tm, float64(s.GEMM.M)/p), 1)
		}
		tiles := math.Ceil(float64(s.GEMM.M)/tm) * math.Ceil(float64(s.GEMM.N)/float64(s.Tile.N))
		block := math.Ceil(tiles / p)
		switch s.Kernel {
		case "allgather_gemm":
			ctas = tiles
		case "gemm_reducescatter":
			ctas, rows = tiles+block, (p-1)*block
		default:
			ctas, rows = block+p-1, 2*(p-1)*block
		}
	}
	runs := float64(max(len(s.InjectedDelaysS), 1) * max(s.Seeds, 1) * max(len(s.SyncModes), 1))
	if s.ScriptSource == "table" {
		rows = float64(len(s.Script))
	}
	b := Budget{
		MemoryBytes: (1536*ctas + 512*rows) * runs,
		Events:      2 * ctas * runs,
		Fields:      []string{"gemm", "tile", "injected_delays_s", "seeds", "sync_modes"},
		Detail:      fmt.Sprintf("%.0f CTAs and %.3g script rows in %.0f runs", ctas, rows, runs),
	}
	switch s.ScriptSource {
	case "table":
		b.Fields = append([]string{"script"}, b.Fields...)
	case "setup_run":
		flows := p * (p - 1)
		b.MemoryBytes += 1200 * flows
		b.Events += 2 * flows
		b.Fields = append([]string{"ghosts"}, b.Fields...)
		b.Detail = fmt.Sprintf("a set-up run of %.0f GPUs, %.3g flows; ", p, flows) + b.Detail
	}
	return withCluster(b, clusterBytesPerGPU, &s.Cluster)
}

// Budget of an operators run: one pass's operators, every repeated block
// priced once. Measured (Go's TotalAlloc, LLaMA-2 7B at 8 to 256 layers,
// GPT-22B at 1,024, DeepSeek-V3): 0.17 to 0.42 MB whatever the layer count;
// 512 KB here, plus 64 B per layer (the model's block pattern). No events:
// operators are priced one by one, not simulated.
func (s *Operators) Budget() Budget {
	m, ok := s.Model.Resolve()
	layers := 128.0
	if ok && m.Layers > 0 {
		layers = float64(m.Layers)
	}
	return Budget{
		MemoryBytes: 512<<10 + 64*layers,
		Fields:      []string{"model.layers"},
		Detail:      fmt.Sprintf("one pass of %.0f layers", layers),
	}
}

// Budget of a collective run: each (algorithm, size) runs on its own
// fabric, one after another. Measured (Go's TotalAlloc, dgx-a100 clusters
// of 16 to 256 GPUs, net's collective alone): the topology and routes 7 to
// 14 KB per GPU (16 KB here); a transfer in flight about 1.9 KB (a direct
// all-to-all's flows are all in flight at once; 2 KB here); 1 to 3 events
// per transfer (3 here). With flows, the table keeps a row per transfer
// of every run (about 120 B, twice that while its slice grows; 512 B here).
// Transfers per collective copy are collectiveTransfers'.
func (s *Collective) Budget() Budget {
	gpus := float64(max(clusterGPUs(&s.Cluster), 1))
	// The communicators' sizes (the whole cluster's, by default), not
	// their ranks: a cluster may be far larger than a list should be.
	var sizes []int
	for _, g := range s.Groups {
		sizes = append(sizes, len(g))
	}
	if len(sizes) == 0 {
		sizes = []int{len(s.Group)}
		if len(s.Group) == 0 {
			sizes[0] = int(gpus)
		}
	}
	copies := float64(max(s.Concurrent, 1))
	var total, worstLive float64
	for _, alg := range s.Algorithms {
		for _, size := range s.SizesBytes {
			var run, live float64
			for _, p := range sizes {
				n, l := collectiveTransfers(s, alg, p, size)
				run += n * copies
				live += l * copies
			}
			total += run
			worstLive = max(worstLive, live)
		}
	}
	runs := float64(len(s.Algorithms) * len(s.SizesBytes))
	mem := clusterBytes(&s.Cluster, 16384) + 2048*worstLive + HandOverCopies*linkRowArrowBytes*collectiveLinkRowsPerGPU*gpus*runs
	if s.Flows {
		mem += (512 + HandOverCopies*flowRowArrowBytes) * total
	}
	return Budget{
		MemoryBytes: mem,
		Events:      3 * total,
		Fields:      []string{"cluster", "group", "groups", "concurrent", "algorithms", "sizes_bytes", "channels", "chunks", "flows"},
		Detail:      fmt.Sprintf("%.3g transfers in %d runs on %.0f GPUs", total, len(s.Algorithms)*len(s.SizesBytes), gpus),
	}
}

// collectiveTransfers estimates one copy of the spec's collective on p
// ranks: its transfers (flows) and how many are in flight at once. The
// counts are net's algorithms' (core/net/algo_*.go), checked against
// their flow counts on dgx-a100 clusters of 16 to 256 GPUs: a stepped
// ring sends on every rank and channel at each of its 2(p−1) (all-reduce)
// or p−1 steps; a streamed ring one flow per channel; a direct exchange
// every ordered pair once (all-reduce: twice); halving-doubling 2·log2 p
// rounds of p; a tree all-reduce 4(p−1) edges per chunk, a rooted tree
// p−1, a ring broadcast or reduce p−1 on each channel's chain;
// hierarchical at most 4p·√p. NCCL's choice moves as a ring (streamed or
// stepped) at the choice's bandwidth. Channels left automatic
// count as 8 (one per rail).
func collectiveTransfers(s *Collective, alg string, p int, size float64) (transfers, live float64) {
	n := float64(max(p, 1))
	ch := float64(s.Channels)
	if ch == 0 {
		ch = 8
	}
	chunks := float64(s.Chunks)
	if chunks == 0 {
		k, _ := net.PipelineChunks(size)
		chunks = float64(k)
	}
	pairs := n * (n - 1)
	twice := 1.0
	if s.Collective == "all_reduce" {
		twice = 2
	}
	switch {
	case s.Collective == "send_recv":
		return 1, 1
	case alg == "direct":
		return twice * pairs, twice * pairs
	case (alg == "ring" || alg == "nccl") && s.Ring == "stream" && s.Quantization == nil &&
		(s.Collective == "all_reduce" || s.Collective == "all_gather" || s.Collective == "reduce_scatter"):
		return ch, ch
	case alg == "ring" || alg == "nccl":
		if s.Collective == "broadcast" || s.Collective == "reduce" {
			return (n - 1) * chunks * ch, (n - 1) * ch
		}
		return twice * pairs * ch * max(float64(s.Chunks), 1), n * ch
	case alg == "halving_doubling":
		return 2 * n * math.Ceil(math.Log2(n)), n
	case alg == "tree" && s.Collective == "all_reduce":
		return 4 * (n - 1) * chunks, 4 * (n - 1)
	case alg == "tree":
		return (n - 1) * chunks, n - 1
	}
	return 4 * n * math.Sqrt(n), 4 * n * math.Sqrt(n) // hierarchical
}

// clusterGPUs is the GPU count a cluster spec describes, from its fields
// alone (0 when it cannot tell without building it).
func clusterGPUs(c *Cluster) int {
	switch {
	case c.Preset != "":
		return 8 * max(c.Nodes, 1)
	case c.Topology == "composed":
		return max(c.Nodes, 1) * max(c.GPUsPerNode, 1)
	case c.Topology == "torus" || c.Topology == "mesh":
		n := 1
		for _, d := range c.Dims {
			n *= max(d, 1)
		}
		return n
	}
	return c.GPUs
}

// Budget of a training step: every micro-batch of one replica is a task
// graph per layer of a stage on each of its TP·PP ranks (data-parallel
// replicas are mirrored, simulated once, unless full_simulation or faults
// that may break mirroring (Faults.EveryReplica: every replica counted;
// failed links: ReplicasPerFailedLink each), each further one at
// trainingExtraReplicaShare; the
// estimate counts one replica where core/exec also simulates a replica of
// each other shape and those a fault touches, which the spec alone cannot
// tell). Its bytes
// (trainingBytesPerMicroBatch) are measured as Go's TotalAlloc, which on
// these runs is about twice the live heap's peak (so about what the
// process holds at that peak under GOGC=100). Events (the kernel's count,
// GPT-22B at 8 and 32 layers, tp 2 and 8, pp 1, 2 and 4, mirrored and
// full): 1.9 to 2 per micro-batch, layer of the stage and simulated rank,
// and about 11 more per micro-batch and rank with a pipeline; 4 and 32 here.
func (s *Training) Budget() Budget {
	par := s.Parallel
	tp, pp, cp, mb := max(par.TP, 1), max(par.PP, 1), max(par.CP, 1), max(par.MicroBatch, 1)
	dp := par.DP
	if dp <= 0 {
		dp = max(clusterGPUs(&s.Cluster)/(tp*cp*pp), 1)
	}
	gb := par.GlobalBatch
	if gb <= 0 {
		gb = dp * mb * pp
	}
	micro := float64(max(gb/(dp*mb), 1))
	m, ok := s.Model.Resolve()
	layers := 128.0
	if ok && m.Layers > 0 {
		layers = float64(m.Layers)
	}
	fields := []string{"parallel.global_batch", "model.layers", "parallel.tp", "parallel.pp", "full_simulation"}
	replicas := simulatedReplicas(dp*cp, tp*pp, &s.Faults)
	if s.SimulatesEveryReplica() {
		replicas = float64(dp * cp)
	} else if replicas > 1 {
		fields[len(fields)-1] = "faults"
	}
	ranks := float64(tp * pp)
	stage := math.Ceil(layers/float64(pp)) + 1
	events := 4 * stage
	if pp > 1 {
		events += 32
	}
	perRank := micro * trainingBytesPerMicroBatch(layers, par, ok && m.IsMoE())
	// The timeline's rows for ranks beyond the default's first of each
	// stage (within the measured estimate): a listed rank's rows and their
	// hand-over to Python take about twice its tasks' bytes (a row per task,
	// 128 B and 2 × 90 B of Arrow, against trainingBytesPerMicroBatch's
	// 160–210 B a task).
	steps := ranks * perRank * (1 + (replicas-1)/trainingExtraReplicaShare)
	rows := 2 * max(timelineRanks(s.TimelineRanks, pp, &s.Faults)-float64(pp), 0) * perRank
	if rows > 0 {
		fields = withTimelineField(fields, rows, steps)
	}
	return withCluster(Budget{
		MemoryBytes: steps + rows,
		Events:      micro * ranks * replicas * events,
		Fields:      fields,
		Detail:      fmt.Sprintf("%.0f micro-batches of %.0f layers on %.0f simulated ranks", micro, layers, ranks*replicas),
	}, clusterBytesPerGPU, &s.Cluster)
}

// trainingExtraReplicaShare: a replica simulated beside the first shares
// its plan (the stages' programs) and adds its ranks' task times. Measured
// (peak RSS, GPT-3 175B, TP 8 PP 8, 96 micro-batches): 8,192 GPUs
// simulated whole take 2.44 GB against 0.28 GB mirrored, 65,536 GPUs
// 18.2 GB: 266 KB a further rank, 1/35 of trainingBytesPerMicroBatch's
// estimate for the first replica's; 1/16 here.
const trainingExtraReplicaShare = 16

// timelineRanks is how many ranks a timeline lists (core/job's
// TimelineRanks): those asked, none for [-1], else the first of each of pp
// stages and the stragglers' (Faults.timelineStragglers).
func timelineRanks(asked []int, pp int, f *Faults) float64 {
	switch {
	case len(asked) == 1 && asked[0] == -1:
		return 0
	case len(asked) > 0:
		return float64(len(asked))
	}
	return float64(pp) + f.timelineStragglers()
}

// withTimelineField adds timeline_ranks to the fields a run's memory
// grows with: first when the listed ranks' rows outweigh the rest.
func withTimelineField(fields []string, rows, rest float64) []string {
	if rows > rest {
		return append([]string{"timeline_ranks"}, fields...)
	}
	return append(fields, "timeline_ranks")
}

// clusterFirst moves the cluster's field (cluster, or a base's
// x.cluster) to the front when the cluster's share of the memory is the
// larger: the message's path names what to make smaller.
func clusterFirst(fields []string, cluster, work float64) []string {
	if cluster <= work {
		return fields
	}
	for i, f := range fields {
		if f == "cluster" || strings.HasSuffix(f, ".cluster") {
			return append([]string{f}, append(fields[:i:i], fields[i+1:]...)...)
		}
	}
	return fields
}

// withCluster adds to b a cluster built whole at perGPU bytes a GPU: its
// memory, its field ("cluster", first when it outweighs the rest) and its
// size in the detail. The events keep b's fields: they do not grow with it.
func withCluster(b Budget, perGPU float64, c *Cluster) Budget {
	gpus := clusterGPUs(c)
	cluster := clusterBytes(c, perGPU)
	if b.EventFields == nil {
		b.EventFields = b.Fields
	}
	b.Fields = clusterFirst(append(slices.Clip(b.Fields), "cluster"), cluster, b.MemoryBytes)
	b.MemoryBytes += cluster
	b.Detail += fmt.Sprintf(", a cluster of %d GPUs", gpus)
	return b
}

// clusterBytes is a cluster built whole: perGPU bytes a GPU (its devices,
// its links to switches or neighbours, routes and statistics), and
// pairLinkBytes for each link of a part that links every pair of its GPUs,
// whose links grow with the square of its GPUs.
func clusterBytes(c *Cluster, perGPU float64) float64 {
	return perGPU*float64(clusterGPUs(c)) + pairLinkBytes*pairLinks(c)
}

// pairLinks are the directed links of c's fully connected parts: the
// whole of a fully_connected topology, or every node of a composed one
// whose intra-node links are fully_connected.
func pairLinks(c *Cluster) float64 {
	switch {
	case c.Preset == "" && c.Topology == "fully_connected":
		n := float64(c.GPUs)
		return n * (n - 1)
	case c.Topology == "composed" && c.Intra == "fully_connected":
		g := float64(c.GPUsPerNode)
		return float64(max(c.Nodes, 1)) * g * (g - 1)
	}
	return 0
}

// pairLinkBytes is one link of a fully connected part. Measured (Go's
// heap): topo.FullyConnected of 500 to 2,000 GPUs holds 106–112 B a link
// and allocates about 400; a collective run over 512 such GPUs allocates
// about 590 B a link in all; 1,024 here.
const pairLinkBytes = 1024

// clusterBytesPerGPU is the run's memory that grows with the cluster
// rather than the work: the topology, the fabric's links and the ranks'
// routes and statistics. Measured (the Go heap in use at its peak, GPT-22B
// at 2 layers, TP 8, two micro-batches, dgx-a100 clusters of 8,192 and
// 65,536 GPUs): 5.1–5.2 KB a GPU for a training step; 8 KB here.
const clusterBytesPerGPU = 8192

// sweepRunEventsPerGPU is a fault sweep run's set-up as events (the
// kernel's 3.9 M events/s; DefaultMaxEvents): measured (a Llama-3-8B step
// at TP 8 on 2,048 and 16,384 DGX H100 GPUs, single-cable runs) 7–11 µs a
// GPU a run, 27–41 events; 64 here.
const sweepRunEventsPerGPU = 64

// sweepBytesPerGPU is what a fault sweep holds beyond its runs: every cable
// and whether it is eligible, and the cables table. Measured as
// clusterBytesPerGPU, two samples: 9.6–9.9 KB a GPU in all, 4.5 KB more
// than a step; 8 KB here.
const sweepBytesPerGPU = 8192

// trainingBytesPerMicroBatch is one micro-batch's tasks on one rank: bytes
// per layer of the stage by what multiplies its tasks, plus the pipeline's
// sends, receives and schedule. Measured (TotalAlloc per micro-batch, layer
// of the stage and simulated rank; GPT-3 and Mixtral-8x7B at 4 and 16
// layers, 512 to 4,096 micro-batches, two DGX H100): dense 1.5–2.0 KB at
// tp 1, 2.1–2.2 KB at tp 4, 4.2–4.3 KB with sequence parallelism (separate
// gathers and scatters) and 11.7–13.2 KB with tp_comm_overlap (each GEMM
// in chunks, each with its collective). A mixture-of-experts layer adds
// its router, permutes and all-to-alls: 2 KB more at ep 1 and 6 KB at ep 8
// on tp 1, a quarter of that per rank at tp 4 (each TP rank holds a
// quarter of the expert-parallel member's work). A pipeline's sends,
// receives and schedule add up to 2.3 KB per layer (GPT-3 at tp 2 and
// pp 2, 4.1–4.8 KB in all; at tp 1, 4 and 8 they are within the layer
// terms above, which come out high there: 1.5–2.2 KB in all).
func trainingBytesPerMicroBatch(layers float64, par Parallel, moe bool) float64 {
	tp := max(par.TP, 1)
	layer := 2e3
	switch {
	case tp > 1 && par.TPCommOverlap:
		layer = 14e3
	case tp > 1 && par.SequenceParallel:
		layer = 5e3
	case tp > 1:
		layer = 2.5e3
	}
	if moe {
		expert := 2.5e3
		if par.EP > 1 {
			expert = 7e3
		}
		layer += expert / float64(tp)
	}
	if par.PP > 1 {
		layer += 2.5e3
	}
	return layer * (math.Ceil(layers/float64(max(par.PP, 1))) + 1)
}

// Budget of a fault sweep: its samples run one after another, each one
// run of the base spec: the memory of one, the events of all (in
// "single_link" mode, whose cable count needs the cluster built, those of
// one).
func (s *FaultSweep) Budget() Budget {
	var b Budget
	var base string
	var cluster *Cluster
	switch {
	case s.Training != nil:
		b, base, cluster = s.Training.Budget(), "training", &s.Training.Cluster
	case s.Inference != nil:
		b, base, cluster = s.Inference.Budget(), "inference", &s.Inference.Cluster
	case s.Collective != nil:
		b, base, cluster = s.Collective.Budget(), "collective", &s.Collective.Cluster
	default:
		return Budget{}
	}
	prefixed := func(fields []string) []string {
		out := make([]string, len(fields))
		for i, f := range fields {
			out[i] = Field(base, f)
		}
		return out
	}
	if len(b.EventFields) == 0 {
		b.EventFields = b.Fields
	}
	b.Fields, b.EventFields = prefixed(b.Fields), prefixed(b.EventFields)
	gpus := float64(clusterGPUs(cluster))
	// The sweep holds every cable beside the run's cluster (in a fully
	// connected part, every link again).
	run, sweep := clusterBytes(cluster, clusterBytesPerGPU), clusterBytes(cluster, sweepBytesPerGPU)
	b.Fields = clusterFirst(b.Fields, run+sweep, b.MemoryBytes-run)
	b.MemoryBytes += sweep
	// Each run sets the cluster up again (its faults, routes and
	// communicators), work the events do not count.
	b.Events += sweepRunEventsPerGPU * gpus
	if s.Mode == "sample" {
		// the healthy run and every sample
		b.Events *= float64(s.Samples + 1)
		b.EventFields = append([]string{"samples"}, b.EventFields...)
		b.Detail += fmt.Sprintf(", %d samples", s.Samples)
	}
	return b
}

// checkPassSize bounds one pass's size: operator shapes multiply the batch,
// both sequence lengths and the widest dimension (attention scores:
// batch·heads·seq·kv), and that product must stay far inside int64 and
// float64's exact range (and its time inside the horizon of simulated time).
func checkPassSize(p *Problems, path string, batch, seq, kv int, m *Model) {
	c, ok := m.Resolve()
	if !ok || batch <= 0 || seq <= 0 {
		return
	}
	wide := float64(max(c.Hidden, c.FFNHidden, c.Vocab, c.Heads*max(c.HeadDim, 1), 1))
	if w := float64(batch) * float64(seq) * float64(max(seq, kv)) * wide; w > 1<<62 {
		p.Addf(path, "batch·tokens·context·width = %.3g exceeds 2^62: a pass this large cannot be counted (batch %d, %d tokens, context %d)", w, batch, seq, kv)
	}
}

// Budget of an ssm_tp run: it builds an inference plan per TP degree and
// prompt length, one at a time, each with a decode pass per output token
// (see Inference.Budget for the measured 4 KB per pass and layer); its
// events are every plan's. Each configuration runs on a fresh machine, its
// cluster built whole as a training step's (clusterBytesPerGPU): the last
// one's garbage and the next one live, two clusters at the peak.
func (s *SSMTP) Budget() Budget {
	m, ok := s.Model.Resolve()
	layers := 128.0
	if ok && m.Layers > 0 {
		layers = float64(m.Layers)
	}
	steps := float64(max(s.OutputLength, 1))
	plans := float64(max(len(s.TPDegrees), 1) * max(len(s.PromptLengths), 1))
	return withCluster(Budget{
		MemoryBytes: 4096 * steps * (layers + 8),
		Events:      inferenceEventsPerPass * steps * (layers + 8) * plans,
		Fields:      []string{"output_length", "model.layers", "tp_degrees", "prompt_lengths"},
		Detail:      fmt.Sprintf("%.0f decode passes of %.0f layers per plan, %.0f plans", steps, layers, plans),
	}, 2*clusterBytesPerGPU, &s.Cluster)
}

// SearchWorkers is how many configurations a search (parallel_search,
// serving's search) simulates side by side at most: one per core up to
// this, so that the memory estimate, which counts this many of the largest
// configuration, bounds the run on any machine.
const SearchWorkers = 4

// Budget of a parallel search: each simulated layout is a training step
// (see Training.Budget and trainingBytesPerMicroBatch; the widest EP); the
// estimate is the largest layout's, SearchWorkers of them side by side.
func (s *ParallelSearch) Budget() Budget {
	gpus := max(clusterGPUs(&s.Cluster), 1)
	m, ok := s.Model.Resolve()
	layers := 128.0
	if ok && m.Layers > 0 {
		layers = float64(m.Layers)
	}
	ep := 1
	for _, e := range s.EP {
		ep = max(ep, e)
	}
	worst := 0.0
	for _, tp := range orOne(s.TP) {
		for _, pp := range orOne(s.PP) {
			for _, mb := range orOne(s.MicroBatch) {
				tp, pp, mb := max(tp, 1), max(pp, 1), max(mb, 1)
				dp := max(gpus/(tp*pp), 1)
				micro := float64(max(s.GlobalBatch/(dp*mb), 1))
				par := Parallel{TP: tp, PP: pp, EP: ep, SequenceParallel: !s.NoSequenceParallel}
				worst = max(worst, micro*float64(tp*pp)*trainingBytesPerMicroBatch(layers, par, ok && m.IsMoE()))
			}
		}
	}
	cluster := clusterBytesPerGPU * float64(gpus) // each worker builds its own
	return Budget{
		MemoryBytes: SearchWorkers * (worst + cluster),
		Fields:      clusterFirst([]string{"global_batch", "model.layers", "tp", "pp", "micro_batch", "cluster"}, cluster, worst),
		Detail:      fmt.Sprintf("the largest layout's training step, %.3g GiB, and the cluster, %.3g GiB, %d at a time", worst/(1<<30), cluster/(1<<30), SearchWorkers),
	}
}

func orOne(xs []int) []int {
	if len(xs) == 0 {
		return []int{1}
	}
	return xs
}

// Budget of a serving run: every request keeps its state and its row of
// the requests table, every engine iteration its row of the iterations
// table. Measured (the 100,000-request benchmark of bench/serving_test.go:
// 112 MB resident for 100,000 requests and 103,553 iterations): 1 KB per
// request and 128 B per iteration bound them; each row's hand-over to
// Python (HandOverCopies) is added. Without a request count
// (duration_s), open-loop arrivals are rate × duration (with a margin for
// the draw); a closed loop sends at most one request per client per
// request's shortest time. Iterations are at most the output tokens over
// the fewest sequences an iteration can hold: by Little's law a replica
// holds its arrival rate times a request's time, and no request is faster
// than its output tokens times the decode floor (a replica's weights read
// once from HBM per iteration), so that count is a lower bound on the
// batch and the iterations an upper bound. A search runs its
// configurations up to SearchWorkers at a time.
func (s *Serving) Budget() Budget {
	w := s.Workload
	out := lengthsMean(w.OutputTokens)
	prompt := lengthsMean(w.PromptTokens)
	replicas := float64(max(s.Replicas, 1))
	floor := s.decodeFloorS()
	n := float64(w.Requests)
	rate := w.RatePerS
	switch {
	case w.Arrival == "trace" && w.Trace != nil:
		n = float64(len(w.Trace.ArrivalS))
		if last := len(w.Trace.ArrivalS) - 1; last > 0 && w.Trace.ArrivalS[last] > 0 {
			rate = n / w.Trace.ArrivalS[last]
		}
	case w.Arrival == "closed_loop":
		if n == 0 {
			n = float64(w.Concurrency) * (w.DurationS/(out*floor) + 1)
		}
		rate = float64(w.Concurrency) / (out * floor)
	case n == 0:
		n = 1.2*rate*w.DurationS + 1000
	}
	batch := 1.0
	if rate > 0 {
		batch = rate / replicas * out * floor
	}
	batch = math.Max(1, math.Min(batch, float64(max(s.Engine.MaxNumSeqs, 1))))
	chunks := math.Ceil(prompt / float64(max(s.Engine.MaxNumBatchedTokens, 1)))
	iterations := n * (out + chunks) / batch
	mem := (1024+HandOverCopies*servingRequestRowArrowBytes)*n + (128+HandOverCopies*servingIterationRowArrowBytes)*iterations
	if s.Search != nil {
		mem *= SearchWorkers
	}
	fields := []string{"workload.requests", "workload.output_tokens"}
	if w.DurationS > 0 {
		fields[0] = "workload.duration_s"
	} else if w.Arrival == "trace" {
		fields[0] = "workload.trace"
	}
	// The cluster is built whole (its links carry the KV transfers and the
	// faults). Measured on 1,024 and 8,192 DGX H100 nodes: 2 KB a GPU live
	// during the run, 5.0 KB allocated in all (9.5 KB with disaggregation,
	// whose transfers route between the pools); 4 KB here (6 KB).
	perGPU := 4096.0
	if s.Disaggregation != nil {
		perGPU *= 1.5
	}
	return withCluster(Budget{
		MemoryBytes: mem,
		Events:      iterations,
		Fields:      fields,
		Detail:      fmt.Sprintf("about %.3g requests and at most %.3g engine iterations", n, iterations),
	}, perGPU, &s.Cluster)
}

// lengthsMean is the mean of a length distribution (after defaults).
func lengthsMean(l Lengths) float64 {
	switch l.Dist {
	case "uniform":
		return float64(l.MinTokens+l.MaxTokens) / 2
	case "lognormal":
		return math.Min(float64(l.Tokens)*math.Exp(l.Sigma*l.Sigma/2), float64(max(l.MaxTokens, l.Tokens)))
	case "table":
		t := 0.0
		for _, v := range l.Values {
			t += float64(v)
		}
		return math.Max(t/float64(max(len(l.Values), 1)), 1)
	}
	return float64(max(l.Tokens, 1))
}

// decodeFloorS is the shortest a decode iteration can be: one TP·PP
// replica reading its model's weights once from HBM at the GPU's peak
// bandwidth (1 µs when the model or GPU is unknown).
func (s *Serving) decodeFloorS() float64 {
	m, ok := s.Model.Resolve()
	g, gok := s.GPU.Resolve()
	if !ok || !gok || g.HBMBandwidth() <= 0 {
		return 1e-6
	}
	bytes := float64(model.Params(m)) * hw.DType(s.DType).Bytes()
	return math.Max(bytes/(float64(max(s.TP*s.PP, 1))*g.HBMBandwidth()), 1e-6)
}
