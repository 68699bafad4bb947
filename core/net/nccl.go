package net

import (
	"fmt"
	"math"
	"strings"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/topo"
)

// NCCL is the algorithm that lets NCCL's tuner decide (Collective.Algorithm
// "nccl"): for each size it prices every (algorithm, protocol) pair with
// NCCL's own cost model and picks the fastest, as ncclTopoGetAlgoInfo does;
// the collective then pays what that choice achieves on real hardware (see
// NCCLTuner). Supported for all_reduce, all_gather and reduce_scatter.
const NCCL Algorithm = "nccl"

// Protocol is an NCCL wire protocol.
type Protocol string

const (
	// LL: 8-byte stores of 4 data bytes + a 4-byte flag, so half the link
	// carries payload, but a receiver polls the flag instead of waiting on
	// a fence (lowest latency).
	LL Protocol = "LL"
	// LL128: 128-byte lines of 120 data bytes + an 8-byte flag, relying on
	// NVLink's ordered 128-byte stores.
	LL128 Protocol = "LL128"
	// Simple: bulk copies with a memory fence and a flag per step (highest
	// bandwidth, highest latency).
	Simple Protocol = "Simple"
)

// Protocols lists the protocols in NCCL's order.
func Protocols() []Protocol { return []Protocol{LL, LL128, Simple} }

// NVLS is NCCL's NVLink SHARP all-reduce (the NVSwitch reduces and
// multicasts). The tuner may choose it on Hopper and later; its data then
// moves as a ring at NVLS's achieved bus bandwidth (the network model has
// no in-switch reduction).
const NVLS Algorithm = "nvls"

// NCCLGeneration holds NCCL's tuning constants for one GPU generation (one
// compute-capability index of src/graph/tuning.cc) and the handful of
// figures fitted on measurements that say what its protocols achieve.
// Constants are NCCL's units: GB/s (10^9 B/s) and µs, converted on use.
type NCCLGeneration struct {
	Name string
	// CompCap is the compute capability ×10 (80 Ampere, 90 Hopper, 100 Blackwell).
	CompCap int
	// SpeedsIntraGBps is the per-channel bandwidth ladder the topology search
	// tries inside a node (speedArrayIntra / sm90SpeedArrayIntra in
	// src/graph/search.cc), SpeedsInterGBps across nodes.
	SpeedsIntraGBps, SpeedsInterGBps []float64
	// Indexed by node count N1, N2, N4+ (tuning.cc llMaxBws, perChMax*Bws).
	LLMaxGBps, PerChMaxRingLL128GBps, PerChMaxTreeGBps, PerChMaxTreeLL128GBps [3]float64
	// LLMaxBefore221GBps is llMaxBws as releases before 2.21 have it
	// (NCCLTuner.Before221); zero where they are LLMaxGBps.
	LLMaxBefore221GBps [3]float64
	// NVLSEfficiency (tuning.cc nvlsEfficiency); 0: no NVLS.
	NVLSEfficiency float64
	// NVLSChannels is the CTAs an NVLS all-reduce runs, whatever its size
	// (comm->nvlsChannels, set in src/transport/nvls.cc: NCCL_NVLS_NCHANNELS
	// 16 on Hopper from 2.18 on; 24 for a Blackwell NVLink domain,
	// NVLS_NCHANNELS_SM100_NVL from 2.27). NCCL's NVLS bandwidth is the
	// algorithm's as a whole, not a share per channel.
	NVLSChannels int

	// AchievedNVLS is the fraction of NCCL's modelled NVLS bus bandwidth
	// that NVLS reaches when timed (NCCL's model is what it chooses by,
	// not what its kernels deliver). Fitted, see NCCLGenerations.
	AchievedNVLS float64
	// SimpleMemGBps is the memory traffic NCCL's Simple kernels (its CTAs'
	// loads and stores, local and to the peer) sustain per GPU. A ring
	// all-reduce step reads what arrived and the local input and writes
	// the peer's buffer; over the whole ring a rank issues (3n−2)/(n−1)
	// bytes of memory traffic per byte it sends (all-gather and
	// reduce-scatter: 3), so Simple's bus bandwidth is at most
	// SimpleMemGBps·(n−1)/(3n−2): 4 bytes per byte on 2 GPUs, 3.14 on 8,
	// which is why 2-GPU rings reach ~80 % of what 8-GPU rings do. Fitted;
	// 0: no bound.
	SimpleMemGBps float64
	// LL128MemGBps is the same bound for LL128's kernels (its 128-byte
	// lines carry 120 data bytes; the traffic per byte is Simple's). LL's
	// kernels are bounded by NCCL's own LL cap (llMaxBw). Fitted; 0: no
	// bound.
	LL128MemGBps float64
	// SimpleBaseUs and SimpleStepUs replace NCCL's Simple ring base and
	// per-step NVLink latency (8.4 and 3.4 µs) in the executed time; NVLSUs
	// is NVLS's achieved latency (NCCL models 25 µs). Fitted.
	SimpleBaseUs, SimpleStepUs, NVLSUs float64
	// NVLSTailChannels is the channels' worth of time the last loop of an
	// NVLS all-reduce takes at least, in the releases before 2.21 that
	// walk its data a loop at a time (nvlsLoopedBytes): a loop whose data
	// fills fewer channels still takes that many channels' time, one
	// channel pulling less than NVLS's whole bandwidth. Fitted; 0: each
	// byte costs the same, as 2.21's even split across channels runs.
	NVLSTailChannels float64
}

// NCCL's latency tables (src/graph/tuning.cc, ncclTunerConstantsDefaults),
// µs, by algorithm and protocol (LL, LL128, Simple).
var (
	ncclBaseLatUs = map[Algorithm][3]float64{Tree: {6.8, 14.0, 8.4}, Ring: {6.6, 14.0, 8.4}, NVLS: {0, 0, 0}}
	ncclHWLatUs   = map[string]map[Algorithm][3]float64{
		"nvlink": {Tree: {0.6, 1.25, 4.0}, Ring: {0.6, 1.9, 3.4}, NVLS: {0, 0, 25}},
		"pci":    {Tree: {1.0, 1.9, 4.0}, Ring: {1.0, 2.5, 5.7}, NVLS: {0, 0, 0}},
		"net":    {Tree: {5.0, 8.5, 14}, Ring: {2.7, 4.0, 14.0}, NVLS: {0, 0, 18}},
	}
	// treeCorrection: tuning.cc treeCorrectionFactor, by protocol and
	// log2(bytes/64), applied to tree all-reduce bandwidth when choosing.
	treeCorrection = [3][24]float64{
		{1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
		{1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0},
		{.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9},
	}
)

const (
	// Threads per channel and the per-thread work below which NCCL uses
	// fewer channels, then fewer threads (src/include/device.h
	// NCCL_{LL,SIMPLE}_MAX_NTHREADS 512, NCCL_LL128_MAX_NTHREADS 640;
	// src/include/comm.h NCCL_{LL,LL128,SIMPLE}_THREAD_THRESHOLD 8, 8, 64,
	// ring LL's multiplied by the rank count in tuning.cc; the loop is in
	// topoGetAlgoInfo, src/enqueue.cc).
	ncclMaxChannels = 32 // MAXCHANNELS/2 for the ring graph (src/init.cc)
	// ncclNetOverheadUs: getNetOverhead in tuning.cc (x86 Intel and the
	// default; ×3 for Simple).
	ncclNetOverheadUs = 1.0
)

var (
	ncclThreads   = [3]int{512, 640, 512}
	ncclThreshold = [3]int{8, 8, 64}
)

// NCCLGenerations returns the generations the tuner knows, oldest first.
// NCCL's constants are quoted from src/graph/tuning.cc and search.cc
// (NVIDIA/nccl, read at 5067397, 2026). The fitted figures come from
// bench/fidelity/nccl.go's fit (`go test ./bench/fidelity -run
// TestNCCLFitIsOptimal -v` prints the grid's optimum and fails if these
// differ from it), on the even-position sizes of 2 MiB and more of the
// generation's NVLink all-reduce tables, each table weighing the same:
// Ampere on Vidur's a100_dgx 8/8, 4/4, 2/2 and a100_pairwise_nvlink 2/2
// and the nccl-tests 8×A100 sweep; Hopper on Vidur's h100_dgx 8/8, 4/4,
// 2/2 and h100_pairwise_nvlink 2/2. The odd positions, the smaller sizes
// and the PCIe-bound 4-GPU VMs check it (bench/fidelity/COLLECTIVES.md).
// Hopper's LL128 has no bound: no measured size runs it (NVLS wins from
// about 1 MiB). Blackwell has no measurement: NCCL's model as it is.
func NCCLGenerations() []NCCLGeneration {
	intra := []float64{40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0}
	inter := []float64{48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2, 0.24, 0.12}
	intra90 := []float64{60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0}
	inter90 := []float64{48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12}
	return []NCCLGeneration{
		{Name: "ampere", CompCap: 80, SpeedsIntraGBps: intra, SpeedsInterGBps: inter,
			LLMaxGBps: [3]float64{87.7, 22.5, 19.0}, PerChMaxRingLL128GBps: [3]float64{20, 20, 20},
			PerChMaxTreeGBps: [3]float64{24.0, 23.6, 17.8}, PerChMaxTreeLL128GBps: [3]float64{20, 20, 20},
			LL128MemGBps: 420, SimpleMemGBps: 720,
			SimpleBaseUs: 34, SimpleStepUs: 7, AchievedNVLS: 1, NVLSUs: 25},
		{Name: "hopper", CompCap: 90, SpeedsIntraGBps: intra90, SpeedsInterGBps: inter90,
			LLMaxGBps: [3]float64{141.0, 45.0, 35.0}, PerChMaxRingLL128GBps: [3]float64{36.7, 36.7, 36.7},
			LLMaxBefore221GBps: [3]float64{87.7, 22.5, 19.0}, // Ampere's, up to 2.20
			PerChMaxTreeGBps:   [3]float64{38.7, 41.4, 36.0}, PerChMaxTreeLL128GBps: [3]float64{36.7, 36.7, 29.0},
			NVLSEfficiency: 0.85, NVLSChannels: 16,
			LL128MemGBps: 0, SimpleMemGBps: 1190,
			SimpleBaseUs: 12, SimpleStepUs: 4, AchievedNVLS: 1, NVLSUs: 28, NVLSTailChannels: 12},
		{Name: "blackwell", CompCap: 100, SpeedsIntraGBps: intra90, SpeedsInterGBps: inter90,
			LLMaxGBps: [3]float64{2 * 141.0, 2 * 45.0, 2 * 35.0}, PerChMaxRingLL128GBps: [3]float64{40, 40, 40},
			PerChMaxTreeGBps: [3]float64{70.0, 42.8, 24.0}, PerChMaxTreeLL128GBps: [3]float64{55.6, 31.67, 20.0},
			NVLSEfficiency: 0.74, NVLSChannels: 24,
			SimpleBaseUs: 8.4, SimpleStepUs: 3.4, AchievedNVLS: 1, NVLSUs: 25},
	}
}

// NCCLGenerationByName returns a generation of NCCLGenerations.
func NCCLGenerationByName(name string) (NCCLGeneration, bool) {
	for _, g := range NCCLGenerations() {
		if g.Name == name {
			return g, true
		}
	}
	return NCCLGeneration{}, false
}

// generationOfTech maps an NVLink generation to the GPUs that carry it
// (NVLink 3: A100, 4: H100/H200, 5: B200); other links get Ampere's tables.
func generationOfTech(tech string) string {
	switch tech {
	case "nvlink4":
		return "hopper"
	case "nvlink5":
		return "blackwell"
	}
	return "ampere"
}

// gpuNVLinkTech is the NVLink technology of a link leaving one of the
// ranks' GPUs, "" if none has one.
func gpuNVLinkTech(t *topo.Topology, ranks []int) string {
	for _, r := range ranks {
		for _, l := range t.Out(t.RankDevice(r)) {
			if tech := t.Links[l].Tech; strings.HasPrefix(tech, "nvlink") {
				return tech
			}
		}
	}
	return ""
}

// NCCLTuner is NCCL's model of one communicator: the ring graph NCCL's
// topology search would build (channels × per-channel bandwidth), and per
// (algorithm, protocol) a latency and a bus bandwidth, as ncclTopoTuneModel
// computes them; Choose picks the fastest for a size. Build it once per
// communicator (NewNCCLTuner) and ask it once per size.
type NCCLTuner struct {
	Gen          NCCLGeneration
	Ranks, Nodes int
	// IntraHW is "nvlink" or "pci" (the link inside a node); NVSwitch says
	// whether the node's GPUs meet at a switch (NVLS needs it).
	IntraHW  string
	NVSwitch bool
	// GraphChannels × ChannelGBps is the ring graph's bus bandwidth, GB/s.
	GraphChannels int
	ChannelGBps   float64
	// BuiltGraphChannels is the graph's channels on the intra-node link as
	// its preset builds it (GraphChannels but for a what-if link): the
	// hardware NCCL's per-GPU caps were measured on, which a kernel on
	// fewer channels shares out (Choose).
	BuiltGraphChannels int
	// Before221 prices the choice with the tuning constants of the
	// releases before NCCL 2.21 (NCCLReleaseBefore221) and runs NVLS a
	// loop at a time as their kernel does (nvlsLoopedBytes).
	Before221 bool
	// LinkBytesPerS is the bus bandwidth the ring's links carry at full
	// efficiency, what the flow model's links give: inside a node the raw
	// bandwidth of its slowest hop; across nodes its NICs' (one a channel)
	// or, where less, its GPUs' NVLink (each GPU forwards on NVLink all the
	// channels it does not send out of the node: (k−1)/k of them, k of the
	// ring's GPUs a node).
	LinkBytesPerS float64
	// PayloadBytesPerS is what those links carry of a collective's data at
	// their collective efficiency (hw.Link.CollectiveEfficiency: NVLink's
	// and the NICs' own), the bus bandwidth NCCL's Simple ring achieves
	// across nodes; 0 inside a node, where the generation's measured
	// figures set it.
	PayloadBytesPerS float64
}

// NCCLChoice is what NCCL does with one collective of one size.
type NCCLChoice struct {
	Algorithm Algorithm
	Protocol  Protocol
	// ModelTimeS is NCCL's own estimate (what it chose by).
	ModelTimeS float64
	// LatencyS and AlgBytesPerS are what the choice achieves: the
	// collective takes LatencyS + bytes / AlgBytesPerS alone.
	LatencyS     float64
	AlgBytesPerS float64
	// BusBytesPerS = AlgBytesPerS × the nccl-tests bus factor.
	BusBytesPerS float64
	// Channels the kernel runs with (fewer for small messages).
	Channels int
}

// TimeS is the choice's time for bytes, alone on its links.
func (c NCCLChoice) TimeS(bytes float64) float64 { return c.LatencyS + bytes/c.AlgBytesPerS }

// NewNCCLTuner builds the tuner of a communicator over ranks of t.
func NewNCCLTuner(t *topo.Topology, ranks []int) (*NCCLTuner, error) {
	n := len(ranks)
	// Nodes: the distinct host nodes of the ranks; GPUs outside nodes (a
	// single-tier topology) share one box.
	nodes := map[int]bool{}
	for _, r := range ranks {
		nodes[t.Devices[t.RankDevice(r)].Node] = true
	}
	tu := &NCCLTuner{Ranks: n, Nodes: max(1, len(nodes)), IntraHW: "pci"}
	// The ring's hops inside nodes: their slowest raw bandwidth and, as
	// NCCL counts it, that bandwidth times the link's collective
	// efficiency (NCCL's per-link NVLink figure over the datasheet's).
	intraTech, genTech, intraBW, intraEff := "", "", math.Inf(1), 1.0
	slowestTech := ""
	interBW, interEff := math.Inf(1), 1.0
	for i := range ranks {
		a, b := t.RankDevice(ranks[i]), t.RankDevice(ranks[(i+1)%n])
		if a == b {
			continue
		}
		path, err := t.Route(a, b)
		if err != nil {
			return nil, err
		}
		same := t.Devices[a].Node == t.Devices[b].Node
		for _, l := range path {
			lk := t.Links[l]
			eff := linkEff(lk.Tech)
			if same {
				if lk.BandwidthBytesPerS < intraBW {
					intraBW, intraEff, slowestTech = lk.BandwidthBytesPerS, eff, lk.Tech
				}
				if intraTech == "" || strings.HasPrefix(lk.Tech, "pcie") {
					intraTech = lk.Tech
				}
				if genTech == "" && strings.HasPrefix(lk.Tech, "nvlink") {
					genTech = lk.Tech
				}
				if t.Devices[t.Links[l].Dst].Kind == topo.Switch {
					tu.NVSwitch = true
				}
			} else if lk.BandwidthBytesPerS < interBW {
				interBW, interEff = lk.BandwidthBytesPerS, eff
			}
		}
	}
	if strings.HasPrefix(intraTech, "nvlink") {
		tu.IntraHW = "nvlink"
	}
	tu.NVSwitch = tu.NVSwitch && tu.IntraHW == "nvlink"
	// The generation: of the NVLink the GPUs carry (a ring that also
	// crosses PCIe is still on those GPUs; a ring of one GPU per node,
	// a data-parallel group under TP 8, crosses none but runs on them).
	if genTech == "" {
		genTech = gpuNVLinkTech(t, ranks)
	}
	gen, _ := NCCLGenerationByName(generationOfTech(genTech))
	tu.Gen = gen
	tu.LinkBytesPerS = math.Min(intraBW, interBW)
	if math.IsInf(tu.LinkBytesPerS, 1) {
		tu.LinkBytesPerS = 0
	}
	if tu.Nodes == 1 {
		tu.GraphChannels, tu.ChannelGBps = ringGraph(gen, intraBW*intraEff/1e9, gen.SpeedsIntraGBps)
		tu.BuiltGraphChannels = tu.GraphChannels
		if l, ok := hw.LinkByName(slowestTech); ok && l.BandwidthBytesPerS != intraBW {
			tu.BuiltGraphChannels, _ = ringGraph(gen, l.BandwidthBytesPerS*intraEff/1e9, gen.SpeedsIntraGBps)
		}
	} else {
		// Across nodes every channel leaves through its own NIC at the
		// inter-node speed (one channel per rail, DefaultChannels).
		nics := DefaultChannels(t, ranks)
		speed := ladder(gen.SpeedsInterGBps, math.Min(interBW*interEff, intraBW*intraEff*float64(nics))/1e9)
		tu.GraphChannels, tu.ChannelGBps = nics, speed
		tu.BuiltGraphChannels = nics
		// What the links give: NCCL's inter-node speeds are a coarse
		// ladder (an HDR NIC's 23.5 GB/s of payload counts as 20), and its
		// model does not see that a node's GPUs also forward on NVLink.
		tu.LinkBytesPerS = float64(nics) * interBW
		tu.PayloadBytesPerS = tu.LinkBytesPerS * interEff
		if k := (n + tu.Nodes - 1) / tu.Nodes; k > 1 && !math.IsInf(intraBW, 1) {
			nv := intraBW * float64(k) / float64(k-1)
			tu.LinkBytesPerS = math.Min(tu.LinkBytesPerS, nv)
			tu.PayloadBytesPerS = math.Min(tu.PayloadBytesPerS, nv*intraEff)
		}
	}
	return tu, nil
}

// linkEff is the fraction of a link NCCL's model counts (its per-link
// NVLink figure over the datasheet's: hw.Link.CollectiveEfficiency); 1 for
// links without one.
func linkEff(tech string) float64 {
	if l, ok := hw.LinkByName(tech); ok && l.CollectiveEfficiency > 0 {
		return l.CollectiveEfficiency
	}
	return 1
}

// PathEfficiency is the collective efficiency of a route as a whole: its
// slowest link after each link's own efficiency over its slowest raw
// link, min(B·e) / min(B). A flow's bytes over it divided by this take
// the time the efficient bottleneck sets; the least efficient link
// technology on the route may not be the one that limits it (a NIC path's
// PCIe hops are wider than the NIC).
func PathEfficiency(t *topo.Topology, path []int32) float64 {
	raw, eff := pathRates(t, path)
	if !(raw > 0) || math.IsInf(raw, 1) {
		return 1
	}
	return eff / raw
}

// pathRates are a route's slowest raw link bandwidth and its slowest link
// bandwidth after each link's collective efficiency, min(B) and min(B·e)
// (+Inf for an empty route).
func pathRates(t *topo.Topology, path []int32) (raw, eff float64) {
	raw, eff = math.Inf(1), math.Inf(1)
	for _, l := range path {
		lk := t.Links[l]
		bw := lk.BandwidthBytesPerS * lk.Health
		raw = math.Min(raw, bw)
		eff = math.Min(eff, bw*linkEff(lk.Tech))
	}
	return raw, eff
}

// ladder is the fastest speed of the ladder not above bw (the slowest if
// none fits).
func ladder(speeds []float64, bw float64) float64 {
	for _, s := range speeds {
		if s <= bw {
			return s
		}
	}
	return speeds[len(speeds)-1]
}

// ringGraph is the single-node ring graph NCCL's search finds on a GPU
// with totalGBps of link bandwidth (ncclTopoCompute, search.cc): from the
// fastest ladder speed not above it, as many channels as fit, trying
// slower speeds (while above 0.49 of the first) until the channels cover
// the bandwidth, keeping the largest total; then channels duplicated at
// half the speed (ncclTopoDupChannels: when the speed is ≥ 25 GB/s, and
// on post-Ampere parts only from 50 GB/s or with ≤ 4 channels).
func ringGraph(g NCCLGeneration, totalGBps float64, speeds []float64) (int, float64) {
	first := ladder(speeds, totalGBps)
	nc, speed := 0, first
	for _, s := range speeds {
		if s > first {
			continue
		}
		if s/first <= 0.49 {
			break
		}
		if c := min(ncclMaxChannels, int(totalGBps/s+1e-6)); float64(c)*s > float64(nc)*speed+1e-9 {
			nc, speed = c, s
		}
		if float64(nc)*speed >= totalGBps-1e-6 {
			break
		}
	}
	nc = max(1, nc)
	if speed >= 25 && !(g.CompCap > 80 && speed < 50 && nc > 4) {
		dup := min(2*nc, ncclMaxChannels)
		speed /= float64((dup + nc - 1) / nc)
		nc = dup
	}
	return nc, speed
}

// SimpleMemoryPerByte is the memory traffic (bytes loaded and stored by
// NCCL's kernels, locally and into the peer's buffer) per byte a rank
// sends on the ring. All-reduce, counted per chunk c = S/n: the first
// step reads c; the n−2 reduce steps read two chunks; the reduce-and-copy
// step reads two and writes one; the n−2 copy steps read one and write
// one; the last step reads one and writes one; every one of the 2(n−1)
// sends is also a store into the peer: (6n−4)c over 2(n−1)c sent, i.e.
// (3n−2)/(n−1). All-gather and reduce-scatter: a read, a local write
// and a remote write per chunk sent, 3.
func SimpleMemoryPerByte(op Op, n int) float64 {
	if op == AllReduce && n > 1 {
		return float64(3*n-2) / float64(n-1)
	}
	return 3
}

func protoIndex(p Protocol) int {
	switch p {
	case LL:
		return 0
	case LL128:
		return 1
	}
	return 2
}

// nodeIndex is tuning.cc's index2: N1, N2, N4+.
func (tu *NCCLTuner) nodeIndex() int {
	if tu.Nodes <= 2 {
		return tu.Nodes - 1
	}
	return 2
}

// model is NCCL's (latency µs, bus bandwidth GB/s, algorithm bandwidth
// GB/s) of (a, p) for op; ok false where NCCL has none.
func (tu *NCCLTuner) model(op Op, a Algorithm, p Protocol) (latUs, busGBps, algGBps float64, ok bool) {
	g := &tu.Gen
	n, nodes := tu.Ranks, tu.Nodes
	pi, ni := protoIndex(p), tu.nodeIndex()
	nsteps := n - 1
	if op == AllReduce {
		nsteps = 2 * (n - 1)
	}
	switch {
	case a == Tree && op != AllReduce, a == NVLS && (op != AllReduce || p != Simple || g.NVLSEfficiency == 0 || nodes > 1 || !tu.NVSwitch):
		return 0, 0, 0, false
	case p == LL128 && tu.IntraHW != "nvlink":
		// LL128 is on by default only where every intra-node path is
		// NVLink (typeIntra <= PATH_NVB in ncclTopoTuneModel).
		return 0, 0, 0, false
	}
	nc := float64(tu.GraphChannels)
	bus := nc * tu.ChannelGBps
	switch {
	case a == NVLS:
		// NVLS reduces in the switch: its graph has the GPU's NVLink
		// bandwidth, pipelining two operations (×2) at nvlsEfficiency,
		// bounded by the graph's own bandwidth.
		bus = math.Min(bus*2*g.NVLSEfficiency, bus)
	case a == Ring && p == LL:
		bus = math.Min(g.LLMaxGBps[ni], bus*0.5)
	case a == Ring && p == LL128:
		bus = math.Min(bus*0.92, nc*g.PerChMaxRingLL128GBps[ni])
	case a == Tree:
		bus = math.Min(bus*0.92, nc*g.PerChMaxTreeGBps[ni])
		if p == LL {
			bus = math.Min(bus/3.8, g.LLMaxGBps[ni])
		}
		if p == LL128 {
			f := 120.0 / 128
			if nodes == 1 {
				f = 7.0 / 9
			}
			bus = math.Min(bus*f, nc*g.PerChMaxTreeLL128GBps[ni])
		}
	}
	alg := bus * float64(n) / float64(nsteps)
	if a == Tree {
		alg = bus * 0.5
	}
	hw := tu.IntraHW
	intra := ncclHWLatUs[hw][a][pi]
	inter := ncclHWLatUs["net"][a][pi]
	if n == nodes { // one GPU per node: latencies fully exposed
		inter = ncclHWLatUs["net"][Tree][pi]
	}
	lat := ncclBaseLatUs[a][pi]
	switch a {
	case Ring:
		if nodes > 1 {
			ov := ncclNetOverheadUs
			if p == Simple {
				ov *= 3
			}
			intra = math.Max(intra, ov)
		}
		inSteps := 0
		if nodes > 1 {
			inSteps = nodes - 1
			if op == AllReduce {
				inSteps = 2 * (nodes - 1)
			}
		}
		lat += float64(nsteps-inSteps)*intra + float64(inSteps)*inter
	case Tree:
		lat += 2 * (float64(n/nodes-1)*intra + float64(log2i(nodes))*inter)
	case NVLS:
		lat = intra
	}
	return lat, bus, alg, true
}

func log2i(x int) int {
	l := 0
	for x > 1 {
		x >>= 1
		l++
	}
	return l
}

// modelTime is ncclTopoGetAlgoTime: latency + bytes / bandwidth, with the
// tree's medium-size correction and the multi-node ring plateau.
func (tu *NCCLTuner) modelTime(op Op, a Algorithm, p Protocol, bytes float64) (float64, bool) {
	lat, bus, alg, ok := tu.model(op, a, p)
	if !ok || alg <= 0 {
		return 0, false
	}
	if tu.Before221 {
		lat, alg = tu.before221(op, a, p, lat, bus, alg)
	}
	if ls := log2i(int(bytes) >> 6); a == Tree && op == AllReduce && int(bytes)>>6 > 0 && ls < 23 {
		alg *= treeCorrection[protoIndex(p)][ls]
	}
	if a == Ring && p == Simple && tu.Nodes > 1 && op == AllReduce && bytes/float64(2*tu.GraphChannels*tu.Ranks) >= 64 {
		lat *= 1.4 // "plateau effect of ring" (compute capability ≥ 8.0)
	}
	return lat*1e-6 + bytes/(alg*1e9), true
}

// before221 is the latency (µs) and algorithm bandwidth (GB/s) that the
// tuner of a release before 2.21 gives (a, p), from the newer model's
// (latency, bus and algorithm bandwidth): its
// ring LL takes a quarter of the graph's bus bandwidth for an all-reduce
// or across nodes, a third otherwise, where 2.21 takes half; its LL cap is
// LLMaxBefore221GBps where the generation has one (Hopper's 87.7 against
// 141); its NVLS latency is 23 µs against 25 (NVIDIA/nccl 2.21.5-1,
// ab2b89c, src/graph/tuning.cc). Only the choice uses them: what the
// chosen protocol then achieves is what it is measured to (Choose).
func (tu *NCCLTuner) before221(op Op, a Algorithm, p Protocol, lat, bus, alg float64) (float64, float64) {
	g, ni := &tu.Gen, tu.nodeIndex()
	llMax := g.LLMaxGBps[ni]
	if g.LLMaxBefore221GBps[ni] > 0 {
		llMax = g.LLMaxBefore221GBps[ni]
	}
	switch {
	case a == Ring && p == LL:
		f := 1.0 / 3
		if tu.Nodes > 1 || op == AllReduce {
			f = 1.0 / 4
		}
		graph := float64(tu.GraphChannels) * tu.ChannelGBps
		alg *= math.Min(llMax, graph*f) / bus
	case a == Tree && p == LL:
		alg *= math.Min(bus, llMax) / bus
	case a == NVLS:
		lat = nvlsHWLatBefore221Us
	}
	return lat, alg
}

// OldestNCCLRelease is the oldest NCCL release whose tuning the tuner
// models (NVLS, Hopper's tables: 2.18).
const OldestNCCLRelease = "2.18"

// NCCLReleaseBefore221 parses an NCCL release ("2.19", "2.19.3", "" for
// the newest) and says whether its tuner chooses with the constants of
// the releases before 2.21 (NCCLTuner.Before221).
func NCCLReleaseBefore221(release string) (bool, error) {
	if release == "" {
		return false, nil
	}
	var major, minor, patch int
	n, _ := fmt.Sscanf(release, "%d.%d.%d", &major, &minor, &patch)
	if n < 2 || major < 0 || minor < 0 || patch < 0 || fmt.Sprint(major, ".", minor) != release && fmt.Sprint(major, ".", minor, ".", patch) != release {
		return false, fmt.Errorf("must be a release such as \"2.19\" or \"2.19.3\", got %q", release)
	}
	if major < 2 || major == 2 && minor < 18 {
		return false, fmt.Errorf("must be %s or later (older releases' tuning is not modelled), got %q", OldestNCCLRelease, release)
	}
	return major == 2 && minor < 21, nil
}

// nvlsLoopedBytes is the bytes whose time an NVLS all-reduce of bytes over
// n ranks on nc channels takes in the releases before 2.21, whose kernel
// (src/device/all_reduce.h, 2.19.3) walks the data a loop at a time, each
// loop a piece of n chunks for every channel in channel order: in the last
// loop the channels past the data idle while the others move whole
// pieces, and a loop of pieces for fewer than tail channels takes tail
// channels' time. So the time steps up at every loop (on 8 H100s 2 MiB
// below 8 MiB, 4 MiB to 64 MiB), as Vidur's tables do. The chunk is
// calcCollChunking's (src/enqueue.cc): 128 KiB, halved to 64, 32 and 16 KiB
// below 64, 8 and 2 loops of it. From 2.21 each channel takes an even share
// of the data (ncclCollCbdPart) and its last chunk shrinks to fit.
func nvlsLoopedBytes(bytes float64, nc, n int, tail float64) float64 {
	ops := float64(nc * n)
	chunk := 131072.0
	for _, loops := range []float64{64, 8, 2} {
		if bytes < loops*ops*chunk {
			chunk /= 2
		}
	}
	loop := ops * chunk
	full := math.Ceil(bytes/loop) - 1
	return full*loop + math.Max(bytes-full*loop, loop*tail/float64(nc))
}

// nvlsHWLatBefore221Us is NVLS's NVLink latency in NCCL's model before
// release 2.21 (25 from it: ncclHWLatUs).
const nvlsHWLatBefore221Us = 23

// channels is the number of channels (and the fraction of threads) NCCL
// runs a choice with: the communicator's channels (twice the graph's,
// src/graph/connect.cc) shrunk while each thread would get less than the
// protocol's threshold (topoGetAlgoInfo, src/enqueue.cc); NVLS always runs
// its own count (NCCLGeneration.NVLSChannels).
func (tu *NCCLTuner) channels(a Algorithm, p Protocol, bytes float64) (int, float64) {
	if a == NVLS {
		return tu.Gen.NVLSChannels, 1
	}
	nc := min(2*tu.GraphChannels, 2*ncclMaxChannels)
	pi := protoIndex(p)
	nt, thr := ncclThreads[pi], ncclThreshold[pi]
	if a == Ring && p == LL {
		thr *= tu.Ranks
	}
	for bytes < float64(nc*nt*thr) && nc >= 2 {
		nc--
	}
	full := nt
	for bytes < float64(nc*nt*thr) && nt%128 == 0 {
		nt /= 2
	}
	return nc, float64(nt) / float64(full)
}

// Choose picks NCCL's algorithm and protocol for op on bytes and says what
// it achieves: NCCL's latency (its Simple and NVLS latencies replaced by
// the generation's measured ones) and its modelled bus bandwidth, bounded
// for LL128 and Simple by their kernels' memory traffic (NVLS: times its
// achieved fraction), scaled down when the kernel runs on fewer channels or
// threads than the communicator has.
func (tu *NCCLTuner) Choose(op Op, bytes float64) (NCCLChoice, error) {
	return tu.ChooseFrom(op, bytes, Tree, Ring, NVLS)
}

// ChooseFrom is Choose among some algorithms only (NCCL_ALGO).
func (tu *NCCLTuner) ChooseFrom(op Op, bytes float64, algs ...Algorithm) (NCCLChoice, error) {
	if op != AllReduce && op != AllGather && op != ReduceScatter {
		return NCCLChoice{}, fmt.Errorf("the NCCL tuner models all_reduce, all_gather and reduce_scatter, not %s", op)
	}
	best := NCCLChoice{ModelTimeS: math.Inf(1)}
	for _, a := range algs {
		for _, p := range Protocols() {
			if t, ok := tu.modelTime(op, a, p, bytes); ok && t < best.ModelTimeS {
				best = NCCLChoice{Algorithm: a, Protocol: p, ModelTimeS: t}
			}
		}
	}
	if math.IsInf(best.ModelTimeS, 1) {
		return NCCLChoice{}, fmt.Errorf("no NCCL algorithm for %s on %d ranks", op, tu.Ranks)
	}
	a, p := best.Algorithm, best.Protocol
	lat, bus, _, _ := tu.model(op, a, p)
	g := &tu.Gen
	n := tu.Ranks
	nsteps := n - 1
	if op == AllReduce {
		nsteps = 2 * (n - 1)
	}
	achieved := 1.0
	switch {
	case a == NVLS:
		lat, achieved = g.NVLSUs, g.AchievedNVLS
	case a == Ring && p == Simple:
		inSteps := 0
		if tu.Nodes > 1 {
			inSteps = tu.Nodes - 1
			if op == AllReduce {
				inSteps = 2 * (tu.Nodes - 1)
			}
		}
		intra := ncclHWLatUs[tu.IntraHW][Ring][2]
		if tu.Nodes > 1 {
			intra = math.Max(intra, 3*ncclNetOverheadUs)
		}
		lat += g.SimpleBaseUs - ncclBaseLatUs[Ring][2] + float64(nsteps-inSteps)*(g.SimpleStepUs-intra)
	}
	nc, threads := tu.channels(a, p, bytes)
	bus *= achieved
	if a == NVLS && tu.Before221 && bytes > 0 {
		bus *= bytes / nvlsLoopedBytes(bytes, nc, n, g.NVLSTailChannels)
	}
	if tu.PayloadBytesPerS > 0 {
		// Across nodes the links set the Simple ring's bandwidth; NCCL's
		// model gives each choice's share of it.
		bus *= tu.PayloadBytesPerS / 1e9 / (float64(tu.GraphChannels) * tu.ChannelGBps)
	}
	if p == Simple && a != NVLS && g.SimpleMemGBps > 0 {
		bus = math.Min(bus, g.SimpleMemGBps/SimpleMemoryPerByte(op, n))
	}
	if p == LL128 && g.LL128MemGBps > 0 {
		bus = math.Min(bus, g.LL128MemGBps/SimpleMemoryPerByte(op, n))
	}
	// A kernel on nc channels runs nc CTAs, each with its share of the
	// GPU's capped bandwidth as the communicator has it on the link as
	// built: a what-if link that gives the graph more channels adds CTAs
	// but does not make each one slower.
	if a != NVLS {
		full := min(2*tu.GraphChannels, 2*tu.BuiltGraphChannels, 2*ncclMaxChannels)
		bus *= math.Min(1, float64(nc)/float64(full)) * threads
	}
	best.Channels = nc
	best.LatencyS = lat * 1e-6
	best.BusBytesPerS = bus * 1e9
	if a == Tree {
		best.AlgBytesPerS = best.BusBytesPerS * 0.5
		best.BusBytesPerS = best.AlgBytesPerS * BusBandwidthFactor(op, n)
	} else {
		best.AlgBytesPerS = best.BusBytesPerS * float64(n) / float64(nsteps)
	}
	return best, nil
}
