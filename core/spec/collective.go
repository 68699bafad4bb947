package spec

import (
	"slices"

	"github.com/eidolon-sim/eidolon/core/net"
)

// Collective is the "collective" kind: time one collective operation on a
// cluster, over a sweep of sizes and algorithms, with congestion (several
// communicators or copies at once) and faults.
type Collective struct {
	Header
	Cluster Cluster `json:"cluster"`
	// Collective: "all_reduce" (default), "all_gather", "reduce_scatter",
	// "all_to_all", "broadcast", "reduce", "send_recv".
	Collective string `json:"collective,omitempty"`
	// Algorithms to compare; default: "nccl" where NCCL's tuner prices the
	// collective (all_reduce, all_gather, reduce_scatter at full
	// precision: what a library call costs; then Ring defaults to
	// "stream", as the training kinds run it), else the collective's first
	// algorithm (ring, or direct for all_to_all and send_recv). See
	// CollectiveAlgorithms.
	// "nccl" (all_reduce, all_gather, reduce_scatter) lets NCCL's tuner
	// choose algorithm and protocol by size and prices what that choice
	// achieves (net.NCCLTuner), as the training and inference kinds do;
	// protocol_efficiency is then the tuner's.
	Algorithms []string `json:"algorithms,omitempty"`
	// SizesBytes to sweep, by the nccl-tests convention (all_gather: total
	// output; reduce_scatter: total input; all_to_all: per-rank send
	// buffer). Default [1 GiB].
	SizesBytes []float64 `json:"sizes_bytes,omitempty"`
	// Group of ranks forming the communicator, in ring order. Default: all
	// ranks node by node, every other node backwards, so a ring crosses
	// between nodes on one rail as NCCL orders it. Ignored when Groups is set.
	Group []int `json:"group,omitempty"`
	// Groups: several communicators running the collective at the same time
	// (e.g. the data-parallel groups of a job); they contend for links.
	Groups [][]int `json:"groups,omitempty"`
	// Concurrent copies per communicator, all started at once; default 1.
	Concurrent int `json:"concurrent,omitempty"`
	// Root index in the group for broadcast and reduce.
	Root int `json:"root,omitempty"`
	// Channels: parallel rings for ring algorithms (NCCL's channels), each
	// crossing nodes through different NICs. 0 (default) = as NCCL: when
	// the group spans nodes, one per rail (min of NICs and group GPUs on a
	// node, 8 for whole dgx-h100 nodes); inside one node 1.
	Channels int `json:"channels,omitempty"`
	// Chunks for pipelining; 0 = automatic (see net.Collective).
	Chunks int `json:"chunks,omitempty"`
	// Quantization of the payload on the wire; null = none.
	Quantization *Quantization `json:"quantization,omitempty"`
	// ProtocolEfficiency in (0, 1]: fraction of link time carrying payload
	// under the collective library's protocol; default 1. NCCL on H100
	// NVLink: about 370/450 (NVIDIA, nccl-tests issue 212). Ignored by
	// algorithm "nccl", whose tuner sets it.
	ProtocolEfficiency float64 `json:"protocol_efficiency,omitempty"`
	// Model: "flow" (max-min fair sharing, default) or "unaware"
	// (no contention).
	Model string `json:"model,omitempty"`
	// Ring: how ring algorithms move data. "steps" (default, but "stream"
	// when Algorithms is left to default to "nccl"): every rank sends each
	// step as its own flow, the granularity the network benchmarks time.
	// "stream": each ring channel is one flow over all its
	// hops at the ring's bottleneck rate (NCCL pipelines each step in
	// slices), what training and inference use; the two agree on
	// uncontended rings. Quantized payloads always run by steps.
	Ring string `json:"ring,omitempty"`
	// Issue: how each size's calls are issued back to back, as a benchmark
	// loop issues them, which makes a call last at least the host's part:
	// "device" (default: the collective alone, as the training kinds charge
	// it), "torch" (eager torch.distributed calls, one process per GPU: a
	// PyTorch loop, Vidur's profiling) or "nccl_tests" (all_reduce_perf:
	// one thread launches GPUsPerThread GPUs' kernels). See net.IssueModes.
	Issue string `json:"issue,omitempty"`
	// GPUsPerThread: nccl-tests' -g with issue "nccl_tests" (default 1: one
	// process per GPU, as mpirun runs it).
	GPUsPerThread int `json:"gpus_per_thread,omitempty"`
	// Host: the host's figures for issue "torch" or "nccl_tests"; default
	// the cluster preset's measured ones (net.MeasuredHost: dgx-a100,
	// dgx-h100 for torch), required on other clusters.
	Host *CollectiveHost `json:"host,omitempty"`
	// NCCLVersion is the NCCL release whose tuner algorithm "nccl" chooses
	// as ("2.19", "2.20.5"; from 2.18): releases before 2.21 price their
	// choice with older constants (net.NCCLReleaseBefore221: ring LL at a
	// quarter of the bus bandwidth, so LL128 takes over at smaller sizes).
	// Default the newest, whose choice 2.21 and later share.
	NCCLVersion string `json:"nccl_version,omitempty"`
	Faults      Faults `json:"faults,omitempty"`
	// Flows adds the per-flow table (large: one row per transfer).
	Flows bool `json:"flows,omitempty"`
}

// CollectiveHost are a host's figures for issuing NCCL calls
// (net.HostIssue).
type CollectiveHost struct {
	// TorchIssueS: the interval between back-to-back eager
	// torch.distributed calls of one process.
	TorchIssueS float64 `json:"torch_issue_s,omitempty"`
	// LaunchS: one GPU's share of an nccl-tests iteration.
	LaunchS float64 `json:"launch_s,omitempty"`
	// ChannelS: NCCL's host work per channel of a call, added to either.
	ChannelS float64 `json:"channel_s,omitempty"`
}

// HostIssue is the host as the network model takes it.
func (h CollectiveHost) HostIssue() net.HostIssue {
	return net.HostIssue{TorchIssueS: h.TorchIssueS, LaunchS: h.LaunchS, ChannelS: h.ChannelS}
}

// Quantization sends elements as 1-byte int8 or fp8 with one scale per block.
type Quantization struct {
	// Format: "int8" or "fp8".
	Format string `json:"format"`
	// ElemBytes of the unquantized data; default 2 (bf16).
	ElemBytes float64 `json:"elem_bytes,omitempty"`
	// BlockElems per scale; default 128.
	BlockElems int `json:"block_elems,omitempty"`
	// ScaleBytes per block; default 4 (fp32).
	ScaleBytes float64 `json:"scale_bytes,omitempty"`
}

// CollectiveAlgorithms lists the algorithms of each collective, default
// first: net's registry of collectives (core/net/registry.go), asked of net
// so that validation refuses a misspelled name with its path before
// anything runs, and a new algorithm needs no edit here.
func CollectiveAlgorithms() map[string][]string {
	out := map[string][]string{}
	for _, op := range net.Ops() {
		for _, a := range net.Algorithms(op) {
			out[string(op)] = append(out[string(op)], string(a))
		}
	}
	return out
}

// CollectiveNames lists the collectives in net's order (net.Ops).
func CollectiveNames() []string {
	var out []string
	for _, op := range net.Ops() {
		out = append(out, string(op))
	}
	return out
}

func (s *Collective) Defaults() {
	s.Cluster.Defaults()
	s.Faults.Defaults()
	if len(s.Groups) == 0 {
		// "groups": [] is one communicator, as leaving it out is.
		s.Groups = nil
	}
	if s.Collective == "" {
		s.Collective = "all_reduce"
	}
	tuned := false
	if len(s.Algorithms) == 0 {
		if a := CollectiveAlgorithms()[s.Collective]; len(a) > 0 {
			s.Algorithms = []string{a[0]}
			// What a library call costs: NCCL's tuner where it prices the
			// collective (full precision), run as the training kinds run
			// it (ring streams, below); the operation's first algorithm
			// elsewhere.
			if s.Quantization == nil && slices.Contains(a, string(net.NCCL)) {
				s.Algorithms, tuned = []string{string(net.NCCL)}, true
			}
		}
	}
	if len(s.SizesBytes) == 0 {
		s.SizesBytes = []float64{1 << 30}
	}
	if s.Concurrent == 0 {
		s.Concurrent = 1
	}
	if s.Model == "" {
		s.Model = "flow"
	}
	if s.Ring == "" {
		s.Ring = "steps"
		if tuned {
			s.Ring = "stream"
		}
	}
	if s.Issue == "" {
		s.Issue = net.IssueDevice
	}
	if s.Issue == net.IssueNCCLTests && s.GPUsPerThread == 0 {
		s.GPUsPerThread = 1
	}
	if s.Issue != net.IssueDevice && s.Host == nil && s.Cluster.Preset != "" {
		if h, ok := net.MeasuredHost(s.Cluster.Preset, s.Issue); ok {
			s.Host = &CollectiveHost{TorchIssueS: h.TorchIssueS, LaunchS: h.LaunchS, ChannelS: h.ChannelS}
		}
	}
	if q := s.Quantization; q != nil {
		if q.ElemBytes == 0 {
			q.ElemBytes = 2
		}
		if q.BlockElems == 0 {
			q.BlockElems = 128
		}
		if q.ScaleBytes == 0 {
			q.ScaleBytes = 4
		}
	}
}

func (s *Collective) Validate(p *Problems) {
	s.Cluster.Validate(p, "cluster")
	if _, err := net.NCCLReleaseBefore221(s.NCCLVersion); err != nil {
		p.Addf("nccl_version", "%v", err)
	} else if s.NCCLVersion != "" && !slices.Contains(s.Algorithms, string(net.NCCL)) {
		p.Addf("nccl_version", "applies to algorithm \"nccl\" (NCCL's tuner), which algorithms %v does not hold", s.Algorithms)
	}
	s.Faults.Validate(p, "faults")
	if p.OneOf("collective", s.Collective, CollectiveNames()) {
		for i, a := range s.Algorithms {
			p.OneOf(Index("algorithms", i), a, CollectiveAlgorithms()[s.Collective])
		}
	}
	for i, b := range s.SizesBytes {
		p.InRange(Index("sizes_bytes", i), b, 0, 1e15)
	}
	checkGroup := func(path string, g []int) {
		seen := map[int]bool{}
		for i, r := range g {
			if r < 0 {
				p.Addf(Index(path, i), "must be a rank >= 0, got %d", r)
			}
			if seen[r] {
				p.Addf(Index(path, i), "rank %d appears twice", r)
			}
			seen[r] = true
		}
		if s.Collective == "send_recv" && len(g) != 2 {
			p.Addf(path, "send_recv needs exactly 2 ranks (sender, receiver), got %d", len(g))
		}
	}
	if s.Groups == nil {
		checkGroup("group", s.Group)
	}
	for i, g := range s.Groups {
		if len(g) == 0 {
			p.Addf(Index("groups", i), "must not be empty")
		}
		checkGroup(Index("groups", i), g)
	}
	p.IntInRange("concurrent", s.Concurrent, 1, 1024)
	p.IntInRange("root", s.Root, 0, 1<<20)
	p.IntInRange("chunks", s.Chunks, 0, 4096)
	p.IntInRange("channels", s.Channels, 0, 256)
	if s.ProtocolEfficiency != 0 {
		p.InRange("protocol_efficiency", s.ProtocolEfficiency, 1e-3, 1)
	}
	p.OneOf("model", s.Model, []string{"flow", "unaware"})
	p.OneOf("ring", s.Ring, []string{"steps", "stream"})
	s.validateIssue(p)
	if q := s.Quantization; q != nil {
		p.OneOf("quantization.format", q.Format, []string{"int8", "fp8"})
		p.Positive("quantization.elem_bytes", q.ElemBytes)
		p.IntInRange("quantization.block_elems", q.BlockElems, 1, 1<<20)
		p.NonNegative("quantization.scale_bytes", q.ScaleBytes)
	}
}

// validateIssue checks issue, gpus_per_thread and host.
func (s *Collective) validateIssue(p *Problems) {
	if !p.OneOf("issue", s.Issue, net.IssueModes()) {
		return
	}
	if s.Issue == net.IssueNCCLTests {
		p.IntInRange("gpus_per_thread", s.GPUsPerThread, 1, 1024)
	} else if s.GPUsPerThread != 0 {
		p.Addf("gpus_per_thread", "applies to issue \"nccl_tests\" only: issue is %q", s.Issue)
	}
	if s.Issue == net.IssueDevice {
		if s.Host != nil {
			p.Addf("host", "applies to issue \"torch\" or \"nccl_tests\" only: issue is \"device\"")
		}
		return
	}
	if s.Concurrent > 1 {
		p.Addf("concurrent", "must be 1 with issue %q (a loop issues one call at a time), got %d", s.Issue, s.Concurrent)
	}
	if s.Host == nil {
		p.Addf("host", "the cluster has no measured host figures for issue %q (measured on the presets %v): give host.torch_issue_s, host.launch_s and host.channel_s in seconds", s.Issue, net.MeasuredHostPresets(s.Issue))
		return
	}
	p.InRange("host.torch_issue_s", s.Host.TorchIssueS, 0, 1e-2)
	p.InRange("host.launch_s", s.Host.LaunchS, 0, 1e-2)
	p.InRange("host.channel_s", s.Host.ChannelS, 0, 1e-3)
}
