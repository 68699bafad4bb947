package net

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/topo"
)

func runV(t *testing.T, f Fabric, a AllToAllV) (Result, float64) {
	t.Helper()
	c := NewComms(f)
	var delivered float64
	f.OnDeliver(func(r FlowRecord) { delivered += r.Bytes })
	var res *Result
	require.NoError(t, c.StartAllToAllV(a, func(r Result) { res = &r }))
	require.NoError(t, f.Kernel().Run(nil))
	require.NotNil(t, res)
	return *res, delivered
}

// On a switch (GPU → switch → GPU, links of bandwidth B and latency α/2),
// equal pairs of b bytes put (n−1) flows on every uplink and downlink at
// once: T = (n−1)·b/B + α, the all-to-all closed form; the bytes delivered
// are the off-diagonal sum.
func TestAllToAllVUniformClosedForm(t *testing.T) {
	n, b := 8, float64(64<<20)
	tp, _ := topo.SingleSwitch(n, testLink)
	sizes := make([]float64, n*n)
	for i := range sizes {
		sizes[i] = b
	}
	res, got := runV(t, NewFlowNet(sim.New(), tp), AllToAllV{Ranks: all(n), Bytes: sizes})
	want := float64(n-1)*b/bw + alpha
	require.InEpsilon(t, want, (res.End - res.Start).Seconds(), 0.01)
	assert.InDelta(t, float64(n*(n-1))*b, got, 1)
	assert.Equal(t, n*(n-1), res.Flows)
	// The uniform all-to-all-v takes the time of the equal all_to_all of
	// the same per-rank send buffer (n·b).
	eq := runOne(t, NewFlowNet(sim.New(), tp), Collective{Op: AllToAll, Bytes: float64(n) * b, Ranks: all(n)})
	require.InEpsilon(t, eq, (res.End - res.Start).Seconds(), 0.01)
}

// Under skew the slowest pair's endpoint sets the time: rank 0 holds a hot
// expert and receives H from each of the others, which exchange s ≪ H
// among themselves. Rank 0's downlink carries (n−1)·H shared by n−1 flows:
// T = (n−1)·H/B + α, however small the other pairs.
func TestAllToAllVSkewSlowestEndpointSetsTime(t *testing.T) {
	n, H, s := 8, float64(64<<20), float64(1<<20)
	tp, _ := topo.SingleSwitch(n, testLink)
	sizes := make([]float64, n*n)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if j == 0 {
				sizes[i*n+j] = H
			} else {
				sizes[i*n+j] = s
			}
		}
	}
	res, got := runV(t, NewFlowNet(sim.New(), tp), AllToAllV{Ranks: all(n), Bytes: sizes})
	want := float64(n-1)*H/bw + alpha
	require.InEpsilon(t, want, (res.End - res.Start).Seconds(), 0.01)
	var off float64
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if i != j {
				off += sizes[i*n+j]
			}
		}
	}
	assert.InDelta(t, off, got, 1)
}

// Hierarchical on two nodes of two GPUs (NVSwitch inside, one NIC per GPU
// on a non-blocking leaf): a cross-node pair goes to the same-index GPU of
// the other node, then over NVLink. Bytes: every byte crosses the network
// once; those relayed also cross NVLink once more.
func TestAllToAllVHierarchical(t *testing.T) {
	nv := hw.Link{Name: "nv", BandwidthBytesPerS: 8 * bw, LatencyS: alpha}
	tp, err := topo.Cluster(topo.ClusterConfig{Nodes: 2, GPUsPerNode: 2, Intra: topo.IntraNVSwitch, IntraLink: nv,
		NICsPerNode: 2, NICLink: testLink, HostLink: hw.Link{Name: "pcie", BandwidthBytesPerS: 100 * bw, LatencyS: 0}, Fabric: "rail_optimized", Radix: 8, Oversubscription: 1})
	require.NoError(t, err)
	b := float64(16 << 20)
	sizes := make([]float64, 16)
	for i := range sizes {
		sizes[i] = b
	}
	res, got := runV(t, NewFlowNet(sim.New(), tp), AllToAllV{Ranks: all(4), Bytes: sizes, Hierarchical: true})
	// 4 intra-node pairs, 4 aggregated network transfers of 2b and 4
	// NVLink forwards, each network transfer and forward in RelayChunks
	// pieces (of 4 MiB).
	assert.Equal(t, 4+8*RelayChunks, res.Flows)
	assert.InDelta(t, 4*b+4*2*b+4*b, got, 1)
	// Deduplicated (DeepEP): top-2 over 2 nodes puts a token on
	// D = 2·(1 − (1/2)²) = 1.5 nodes, so each network transfer carries
	// 1.5/2 of its bytes; the NVLink hops are unchanged.
	dd, gotDD := runV(t, NewFlowNet(sim.New(), tp), AllToAllV{Ranks: all(4), Bytes: sizes, Hierarchical: true, TopK: 2})
	assert.InDelta(t, 4*b+4*2*b*0.75+4*b, gotDD, 1)
	assert.Less(t, dd.End-dd.Start, res.End-res.Start)
	direct, _ := runV(t, NewFlowNet(sim.New(), tp), AllToAllV{Ranks: all(4), Bytes: sizes})
	assert.Equal(t, 12, direct.Flows)
	require.Greater(t, (res.End - res.Start).Seconds(), 0.0)
}

func TestAllToAllVRejectsBadSizes(t *testing.T) {
	tp, _ := topo.SingleSwitch(4, testLink)
	c := NewComms(NewFlowNet(sim.New(), tp))
	require.ErrorContains(t, c.StartAllToAllV(AllToAllV{Ranks: all(4), Bytes: make([]float64, 3)}, func(Result) {}), "16 pair sizes")
	bad := make([]float64, 16)
	bad[5] = -1
	require.ErrorContains(t, c.StartAllToAllV(AllToAllV{Ranks: all(4), Bytes: bad}, func(Result) {}), "pair (1, 1)")
}

// DeepEP's normal (training and prefill) kernels on H800 nodes (NVLink
// ~160 GB/s usable, one CX7 400 Gb/s NIC per GPU), 4,096 tokens a rank,
// hidden 7,168, top-8 experts over at most 4 nodes (DeepSeek-V3's
// top-4 groups), FP8 dispatch and BF16 combine: "bottleneck bandwidth"
// 43 / 58 / 51 GB/s dispatch and 43 / 57 / 50 combine at EP 16 / 32 / 64
// (deepseek-ai/DeepEP docs/legacy.md, Performance). DeepEP counts it as
// each token's bytes once per node it reaches, its own node included, over
// the kernel's time. The hierarchical all-to-all-v on dgx-h800 nodes,
// balanced routing, each flow at its route's efficiency, gives the same
// within 10 %: nothing here is fitted to these figures.
func TestHierarchicalAllToAllMatchesDeepEP(t *testing.T) {
	const tokens, hidden, topK, nodeLimit = 4096.0, 7168.0, 8, 4
	want := map[int][2]float64{16: {43, 43}, 32: {58, 57}, 64: {51, 50}}
	for _, ep := range []int{16, 32, 64} {
		tp, err := topo.Preset("dgx-h800", ep/8)
		require.NoError(t, err)
		M := math.Min(nodeLimit, float64(ep/8))
		nodesReached := M * (1 - math.Pow(1-1/M, topK))
		for k, elem := range []float64{1, 2} { // FP8 dispatch, BF16 combine
			per := tokens * topK / float64(ep) * hidden * elem
			sizes := make([]float64, ep*ep)
			for i := range sizes {
				sizes[i] = per
			}
			res, _ := runV(t, NewFlowNet(sim.New(), tp), AllToAllV{Ranks: all(ep), Bytes: sizes,
				Hierarchical: true, TopK: topK, NodeLimit: nodeLimit, PathEfficiency: true})
			gbps := tokens * nodesReached * hidden * elem / (res.End - res.Start).Seconds() / 1e9
			assert.InEpsilon(t, want[ep][k], gbps, 0.10, "EP %d %s: %.1f GB/s", ep, []string{"dispatch", "combine"}[k], gbps)
		}
	}
}

// DeepEP's low-latency (decode) kernels on the same H800 nodes, 128 tokens
// a rank, hidden 7,168, top-8, each token sent once per expert it picks
// (FP8 with a 4-byte scale per 128 values to dispatch, BF16 to combine):
// 118 / 155 / 173 / 192 µs to dispatch and 195 / 273 / 314 / 369 µs to
// combine at EP 16 / 32 / 64 / 128 (deepseek-ai/DeepEP docs/legacy.md,
// "Low-latency kernels with pure RDMA"). The direct all-to-all-v moves the
// same bytes over the network in the measured time less a fixed part of
// every kernel: DeepEPLowLatencyDispatchS and ...CombineS are that part's
// mean at EP 16 and 32 (the fit: the test checks they are), and with them
// EP 64 and 128 come out within 3 % but for the EP 128 combine (−10 %:
// its kernel's fixed part is twice the others').
func TestDirectAllToAllAgainstDeepEPLowLatency(t *testing.T) {
	const tokens, hidden, topK = 128.0, 7168.0, 8
	want := map[int][2]float64{16: {118e-6, 195e-6}, 32: {155e-6, 273e-6}, 64: {173e-6, 314e-6}, 128: {192e-6, 369e-6}}
	fixed := [2]float64{DeepEPLowLatencyDispatchS, DeepEPLowLatencyCombineS}
	var fit [2]float64
	for _, ep := range []int{16, 32, 64, 128} {
		tp, err := topo.Preset("dgx-h800", ep/8)
		require.NoError(t, err)
		for k, elem := range []float64{hidden + hidden/128*4, 2 * hidden} {
			per := tokens * topK / float64(ep) * elem
			sizes := make([]float64, ep*ep)
			for i := range sizes {
				sizes[i] = per
			}
			a := AllToAllV{Ranks: all(ep), Bytes: sizes, PathEfficiency: true}
			res, _ := runV(t, NewFlowNet(sim.New(), tp), a)
			wire := (res.End - res.Start).Seconds()
			a.FixedS = fixed[k]
			res, _ = runV(t, NewFlowNet(sim.New(), tp), a)
			got := (res.End - res.Start).Seconds()
			require.InDelta(t, wire+fixed[k], got, 1e-9, "the fixed part is added once, at the end")
			t.Logf("EP %d %s: %.0f µs on the network, %.0f with the kernels' fixed part, against %.0f", ep, []string{"dispatch", "combine"}[k], wire*1e6, got*1e6, want[ep][k]*1e6)
			if ep <= 32 {
				fit[k] += (want[ep][k] - wire) / 2
				continue
			}
			tol := 0.03
			if ep == 128 && k == 1 {
				tol = 0.11
			}
			assert.InEpsilon(t, want[ep][k], got, tol, "EP %d held out", ep)
		}
	}
	assert.InDelta(t, fit[0], DeepEPLowLatencyDispatchS, 0.5e-6, "dispatch's fixed part is its EP 16 and 32 mean")
	assert.InDelta(t, fit[1], DeepEPLowLatencyCombineS, 0.5e-6, "combine's fixed part is its EP 16 and 32 mean")
}

// Pieces forwarded as they arrive: the relay's NVLink hop hides behind
// the network transfer but for its last piece, so a hierarchical
// all-to-all-v takes less than the network hop followed by the NVLink hop.
func TestHierarchicalAllToAllPipelinesRelay(t *testing.T) {
	tp, err := topo.Preset("dgx-h800", 2)
	require.NoError(t, err)
	n, per := 16, float64(8<<20)
	sizes := make([]float64, n*n)
	for i := range sizes {
		sizes[i] = per
	}
	res, _ := runV(t, NewFlowNet(sim.New(), tp), AllToAllV{Ranks: all(n), Bytes: sizes, Hierarchical: true})
	nic, nvlink := tp.Links[0].BandwidthBytesPerS, 0.0
	for _, l := range tp.Links {
		if l.Tech == "ib-ndr" {
			nic = l.BandwidthBytesPerS
		}
		if l.Tech == "nvlink4-h800" {
			nvlink = l.BandwidthBytesPerS
		}
	}
	require.Positive(t, nvlink)
	network := 8 * per / nic // each GPU's aggregate to the other node
	forward := 7 * per / nvlink
	got := (res.End - res.Start).Seconds()
	assert.Greater(t, got, network)
	assert.Less(t, got, network+forward/2)
}
