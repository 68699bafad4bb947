package net

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/topo"
)

func preset(t *testing.T, name string, nodes int) *topo.Topology {
	t.Helper()
	tp, err := topo.Preset(name, nodes)
	require.NoError(t, err)
	return tp
}

func tuner(t *testing.T, tp *topo.Topology, n int) *NCCLTuner {
	t.Helper()
	tu, err := NewNCCLTuner(tp, all(n))
	require.NoError(t, err)
	return tu
}

// The ring graph NCCL's search builds from the GPU's NVLink bandwidth as
// NCCL counts it (hw: datasheet × NCCL's per-link figure / 25 GB/s):
//   - A100: 12 links × 20 GB/s = 240; ladder 40 → 6 channels; duplicated
//     (40 ≥ 25, Ampere) → 12 × 20.
//   - H100: 18 × 20.6 = 370.8; ladder 60 → 6 channels (360); duplicated
//     (60 ≥ 50) → 12 × 30.
//   - an H100 NVL pair (300 GB/s bridge): 247.2; 60 → 4; → 8 × 30.
func TestNCCLRingGraph(t *testing.T) {
	a := tuner(t, preset(t, "dgx-a100", 1), 8)
	require.Equal(t, [2]float64{12, 20}, [2]float64{float64(a.GraphChannels), a.ChannelGBps})
	require.Equal(t, "ampere", a.Gen.Name)
	require.True(t, a.NVSwitch)
	h := tuner(t, preset(t, "dgx-h100", 1), 8)
	require.Equal(t, [2]float64{12, 30}, [2]float64{float64(h.GraphChannels), h.ChannelGBps})
	require.Equal(t, "hopper", h.Gen.Name)
	pair, err := topo.FullyConnected(2, hwLink(t, "nvlink4", 300e9))
	require.NoError(t, err)
	p := tuner(t, pair, 2)
	require.Equal(t, [2]float64{8, 30}, [2]float64{float64(p.GraphChannels), p.ChannelGBps})
	require.False(t, p.NVSwitch, "a bridge is no NVSwitch: no NVLS")
}

// On 8 A100s NCCL's model gives ring/LL latency 6.6 + 14·0.6 = 15 µs at
// algbw min(87.7, 240/2)·8/14 = 50.11 GB/s, ring/LL128 14 + 14·1.9 = 40.6
// µs at min(240·0.92, 12·20)·8/14 = 126.17 GB/s: they cross at S* =
// 25.6 µs / (1/50.11 − 1/126.17) GB/s⁻¹ = 2.128 MB. Ring/Simple (8.4 +
// 14·3.4 = 56 µs, 240·8/14 = 137.14 GB/s) crosses LL128 at 15.4 µs /
// (1/126.17 − 1/137.14) = 24.4 MB. Trees never win inside one node.
func TestNCCLChoiceBySize(t *testing.T) {
	tu := tuner(t, preset(t, "dgx-a100", 1), 8)
	latLL, _, algLL, _ := tu.model(AllReduce, Ring, LL)
	lat128, _, alg128, _ := tu.model(AllReduce, Ring, LL128)
	latS, _, algS, _ := tu.model(AllReduce, Ring, Simple)
	require.InDelta(t, 15.0, latLL, 1e-9)
	require.InDelta(t, 40.6, lat128, 1e-9)
	require.InDelta(t, 56.0, latS, 1e-9)
	require.InDelta(t, 87.7*8/14, algLL, 1e-9)
	require.InDelta(t, 220.8*8/14, alg128, 1e-9)
	require.InDelta(t, 240.0*8/14, algS, 1e-9)
	cross := func(l1, a1, l2, a2 float64) float64 { return (l2 - l1) * 1e-6 / (1/(a1*1e9) - 1/(a2*1e9)) }
	s1, s2 := cross(latLL, algLL, lat128, alg128), cross(lat128, alg128, latS, algS)
	require.InEpsilon(t, 2.128e6, s1, 1e-3)
	require.InEpsilon(t, 24.4e6, s2, 1e-2)
	for _, c := range []struct {
		bytes float64
		proto Protocol
	}{{2048, LL}, {0.95 * s1, LL}, {1.05 * s1, LL128}, {0.95 * s2, LL128}, {1.05 * s2, Simple}, {1 << 34, Simple}} {
		ch, err := tu.Choose(AllReduce, c.bytes)
		require.NoError(t, err)
		require.Equal(t, Ring, ch.Algorithm, "%v bytes", c.bytes)
		require.Equal(t, c.proto, ch.Protocol, "%v bytes", c.bytes)
	}
}

// Releases before 2.21 price ring LL at a quarter of the graph's bus
// bandwidth for an all-reduce (2.21: half, under the same 87.7 GB/s cap):
// 60 GB/s on 8 A100s, so LL128 takes over at 1.205 MB where 2.21's tuner
// keeps LL to 2.13 MB, as Vidur's DGX A100 kernel times switch (40 µs at
// 1.15 MiB, 57 at 1.25: bench/fidelity COLLECTIVES.md). What LL then
// achieves is the same either way.
func TestNCCLChoiceBefore221(t *testing.T) {
	tu := tuner(t, preset(t, "dgx-a100", 1), 8)
	old := *tu
	old.Before221 = true
	latLL, _, _, _ := tu.model(AllReduce, Ring, LL)
	lat128, _, alg128, _ := tu.model(AllReduce, Ring, LL128)
	algLL := 240.0 / 4 * 8 / 14
	cross := (lat128 - latLL) * 1e-6 / (1/(algLL*1e9) - 1/(alg128*1e9))
	require.InEpsilon(t, 1.2052e6, cross, 1e-4)
	for _, c := range []struct {
		bytes      float64
		old, newer Protocol
	}{{0.95 * cross, LL, LL}, {1.05 * cross, LL128, LL}, {2.0e6, LL128, LL}, {2.3e6, LL128, LL128}} {
		o, err := old.Choose(AllReduce, c.bytes)
		require.NoError(t, err)
		n, err := tu.Choose(AllReduce, c.bytes)
		require.NoError(t, err)
		require.Equal(t, c.old, o.Protocol, "%v bytes, before 2.21", c.bytes)
		require.Equal(t, c.newer, n.Protocol, "%v bytes, 2.21", c.bytes)
		if o.Protocol == n.Protocol {
			require.Equal(t, n.TimeS(c.bytes), o.TimeS(c.bytes), "the choice alone differs")
		}
	}
	for release, before := range map[string]bool{"": false, "2.18": true, "2.20.5": true, "2.21": false, "2.21.5": false, "2.30": false} {
		b, err := NCCLReleaseBefore221(release)
		require.NoError(t, err, release)
		require.Equal(t, before, b, release)
	}
	for _, bad := range []string{"2.17", "1.9", "2", "2.19.x", "v2.19", "2.19.3.1", "-2.19"} {
		_, err := NCCLReleaseBefore221(bad)
		require.Error(t, err, bad)
	}
}

// A small message runs on fewer channels: ring LL on 8 ranks needs 512
// threads × 8·8 bytes = 32 KiB per channel, so 64 KiB runs on 2 of the 24
// channels, and its bandwidth is 2/24 of LL's: 87.7 GB/s · 2/24 · 8/14.
func TestNCCLChannelsShrink(t *testing.T) {
	tu := tuner(t, preset(t, "dgx-a100", 1), 8)
	ch, err := tu.Choose(AllReduce, 64<<10)
	require.NoError(t, err)
	require.Equal(t, 2, ch.Channels)
	require.InEpsilon(t, 87.7e9*2/24*8/14, ch.AlgBytesPerS, 1e-9)
	big, _ := tu.Choose(AllReduce, 1<<20)
	require.Equal(t, 24, big.Channels)
}

// A what-if NVLink twice as wide gives NCCL's graph twice the channels (24
// at 20 GB/s on 8 A100s), but a kernel on few of them still runs each CTA
// at its share of the GPU's capped bandwidth as built: the 64 KiB ring/LL
// call on 2 channels keeps its 87.7 × 2/24 GB/s, where a share of the wider
// communicator's 48 channels had halved it. Wherever NCCL's choice stays
// the same, no size gets slower on the wider link.
func TestNCCLWiderLinkKeepsEachChannel(t *testing.T) {
	for _, name := range []string{"dgx-a100", "dgx-h100"} {
		built := tuner(t, preset(t, name, 1), 8)
		c, err := topo.PresetConfig(name, 1)
		require.NoError(t, err)
		c.IntraLink.BandwidthBytesPerS *= 2
		wide, err := topo.Cluster(c)
		require.NoError(t, err)
		tu := tuner(t, wide, 8)
		require.Equal(t, 2*built.GraphChannels, tu.GraphChannels, name)
		require.Equal(t, built.GraphChannels, tu.BuiltGraphChannels, name)
		same := 0
		for bytes := 1024.0; bytes <= 1<<30; bytes *= 2 {
			b, err := built.Choose(AllReduce, bytes)
			require.NoError(t, err)
			w, err := tu.Choose(AllReduce, bytes)
			require.NoError(t, err)
			if w.Algorithm == b.Algorithm && w.Protocol == b.Protocol {
				same++
				require.LessOrEqual(t, w.TimeS(bytes), b.TimeS(bytes)*(1+1e-12), "%s, %g bytes", name, bytes)
			}
		}
		require.Greater(t, same, 10, name)
	}
	a := tuner(t, preset(t, "dgx-a100", 1), 8)
	c, _ := topo.PresetConfig("dgx-a100", 1)
	c.IntraLink.BandwidthBytesPerS *= 2
	wide, err := topo.Cluster(c)
	require.NoError(t, err)
	b, _ := a.Choose(AllReduce, 64<<10)
	w, _ := tuner(t, wide, 8).Choose(AllReduce, 64<<10)
	require.Equal(t, b.Channels, w.Channels)
	require.InEpsilon(t, 87.7e9*2/24*8/14, w.AlgBytesPerS, 1e-9)
}

// Across two DGX H100 nodes (16 ranks, 8 per node) NCCL's ring/LL
// latency is 6.6 + 28 intra steps × max(0.6, 1 µs net overhead) + 2 inter
// steps × 2.7 µs = 40 µs; the graph is one channel per NIC (8) at the
// inter-node ladder's speed under the NDR NIC's 50 GB/s × 47/50 (45 GB/s).
func TestNCCLMultiNode(t *testing.T) {
	tu := tuner(t, preset(t, "dgx-h100", 2), 16)
	require.Equal(t, 2, tu.Nodes)
	require.Equal(t, 8, tu.GraphChannels)
	require.Equal(t, 45.0, tu.ChannelGBps)
	lat, _, _, ok := tu.model(AllReduce, Ring, LL)
	require.True(t, ok)
	require.InDelta(t, 40.0, lat, 1e-9)
	_, _, _, ok = tu.model(AllReduce, NVLS, Simple)
	require.False(t, ok, "NVLS across nodes needs CollNet")
}

// Across nodes the links, not NCCL's speed ladder, set the Simple ring's
// bandwidth: each channel leaves a node through a NIC of its own, which
// carries 47 of its 50 GB/s (NDR's collective efficiency, "46-48 GB/s per
// NIC"), and each GPU forwards on NVLink the channels it does not send out,
// 7 of 8 on a full node. On DGX H100 the NICs bind (8 × 47 = 376 GB/s of
// bus bandwidth, where the ladder's 45 a channel gave 360 and the flows,
// at full efficiency, 400); on DGX H800, whose NVLink is 200 GB/s, NVLink
// does: 200 × 8/7 × 20.6/25 = 188 GB/s. A ring of one GPU a node is its
// one NIC's 47 (the ladder gave 45 on Hopper, 20 of an HDR NIC's 23.5 on
// Ampere). The simulated 1 GiB all-gather takes the choice's latency and that
// bus bandwidth.
func TestNCCLMultiNodeLinksSetTheBandwidth(t *testing.T) {
	ndr, _ := hw.LinkByName("ib-ndr")
	hdr, _ := hw.LinkByName("ib-hdr")
	h800, _ := hw.LinkByName("nvlink4-h800")
	for _, c := range []struct {
		preset        string
		ranks         []int
		link, payload float64
	}{
		{"dgx-h100", all(16), 8 * ndr.BandwidthBytesPerS, 8 * ndr.BandwidthBytesPerS * ndr.CollectiveEfficiency},
		{"dgx-h800", all(16), h800.BandwidthBytesPerS * 8 / 7, h800.BandwidthBytesPerS * 8 / 7 * h800.CollectiveEfficiency},
		{"dgx-h100", []int{0, 8}, ndr.BandwidthBytesPerS, ndr.BandwidthBytesPerS * ndr.CollectiveEfficiency},
		{"dgx-a100", []int{0, 8}, hdr.BandwidthBytesPerS, hdr.BandwidthBytesPerS * hdr.CollectiveEfficiency},
	} {
		tp := preset(t, c.preset, 2)
		tu, err := NewNCCLTuner(tp, c.ranks)
		require.NoError(t, err)
		require.InEpsilon(t, c.link, tu.LinkBytesPerS, 1e-9, c.preset)
		require.InEpsilon(t, c.payload, tu.PayloadBytesPerS, 1e-9, c.preset)
		const S = float64(1 << 30)
		ch, err := tu.Choose(AllGather, S)
		require.NoError(t, err)
		require.Equal(t, Simple, ch.Protocol)
		require.InEpsilon(t, c.payload, ch.BusBytesPerS, 1e-9, c.preset)
		got := runOne(t, NewFlowNet(sim.New(), tp), Collective{Op: AllGather, Algorithm: NCCL, Bytes: S, Ranks: c.ranks, Stream: true})
		require.InEpsilon(t, ch.TimeS(S), got, 0.005, c.preset)
	}
}

// A ring of one GPU per node (a data-parallel group under TP 8) crosses
// no NVLink but runs on Hopper GPUs: Hopper's inter-node ladder gives the
// 400 Gb/s NIC (47 GB/s as NCCL counts it) 45 GB/s in NCCL's own model,
// where Ampere's would drop to 30.
func TestNCCLOneGPUPerNodeKeepsGeneration(t *testing.T) {
	tp := preset(t, "dgx-h100", 4)
	tu, err := NewNCCLTuner(tp, []int{0, 8, 16, 24})
	require.NoError(t, err)
	require.Equal(t, "hopper", tu.Gen.Name)
	require.Equal(t, 1, tu.GraphChannels)
	require.Equal(t, 45.0, tu.ChannelGBps)
	a100, err := NewNCCLTuner(preset(t, "dgx-a100", 4), []int{0, 8, 16, 24})
	require.NoError(t, err)
	require.Equal(t, "ampere", a100.Gen.Name)
}

// NVLS: on one DGX H100 NCCL may reduce in the NVSwitch; never on A100.
func TestNCCLNVLS(t *testing.T) {
	h := tuner(t, preset(t, "dgx-h100", 1), 8)
	ch, err := h.Choose(AllReduce, 64<<20)
	require.NoError(t, err)
	require.Equal(t, NVLS, ch.Algorithm)
	lat, bus, _, _ := h.model(AllReduce, NVLS, Simple)
	require.Equal(t, 25.0, lat, "hwLat[NVLINK][NVLS][Simple]")
	// NVLS runs comm->nvlsChannels CTAs (16 on Hopper) at its modelled
	// bandwidth as a whole, not a 16/24 share of it.
	require.Equal(t, 16, ch.Channels)
	require.InDelta(t, bus*h.Gen.AchievedNVLS*1e9, ch.BusBytesPerS, 1)
	a := tuner(t, preset(t, "dgx-a100", 1), 8)
	_, _, _, ok := a.model(AllReduce, NVLS, Simple)
	require.False(t, ok)
	_, err = a.Choose(AllToAll, 1<<20)
	require.Error(t, err)
}

// Before 2.21 an NVLS all-reduce takes its data a loop at a time (16
// channels × 8 heads × the chunk: 2 MiB below 8 MiB on 8 H100s), so its
// time steps up when a message spills into another loop, and a last loop
// that fills fewer than NVLSTailChannels channels costs that many; from
// 2.21 every byte costs the same.
func TestNCCLNVLSLoops(t *testing.T) {
	h := tuner(t, preset(t, "dgx-h100", 1), 8)
	tail := h.Gen.NVLSTailChannels
	require.Greater(t, tail, 0.0, "hopper's fitted tail")
	const mib = 1 << 20
	full, err := h.Choose(AllReduce, 64*mib)
	require.NoError(t, err)
	fullAlg := full.AlgBytesPerS
	h.Before221 = true
	for _, c := range []struct{ bytes, looped float64 }{
		{2 * mib, 2 * mib},                       // one full loop
		{2*mib + 64<<10, 2*mib + 2*mib*tail/16},  // a second loop of one piece costs tail channels
		{2*mib + 1.9*mib, 2*mib + 1.9*mib},       // a last loop past tail channels costs its bytes
		{1 * mib, 2 * mib * tail / 16},           // one loop, eight channels' pieces
		{8 * mib, 8 * mib},                       // 32 KiB chunks: two full loops of 4 MiB
		{8*mib + 256<<10, 8*mib + 4*mib*tail/16}, // and a third of one piece
	} {
		ch, err := h.Choose(AllReduce, c.bytes)
		require.NoError(t, err)
		require.Equal(t, NVLS, ch.Algorithm)
		require.InDelta(t, c.looped/fullAlg, c.bytes/ch.AlgBytesPerS, 1e-12, "%.0f bytes", c.bytes)
	}
	empty, err := h.ChooseFrom(AllReduce, 0, NVLS)
	require.NoError(t, err)
	require.InDelta(t, fullAlg, empty.AlgBytesPerS, 1e-3, "no bytes: no loop, and no NaN")
	h.Before221 = false
	for _, b := range []float64{2*mib + 64<<10, 8*mib + 256<<10} {
		ch, err := h.Choose(AllReduce, b)
		require.NoError(t, err)
		require.Equal(t, NVLS, ch.Algorithm)
		require.InDelta(t, fullAlg, ch.AlgBytesPerS, 1e-3, "2.21 splits the data evenly")
	}
}

// A collective with algorithm "nccl" alone on its links takes exactly the
// tuner's time, LatencyS + bytes/AlgBytesPerS, stepped or streamed (the
// tuner's latency includes the links' per-step latency, which the flows
// pay), and the tuner runs once per communicator.
func TestNCCLCollectiveClosedForm(t *testing.T) {
	for _, p := range []string{"dgx-a100", "dgx-h100"} {
		tp := preset(t, p, 1)
		tu := tuner(t, tp, 8)
		for _, op := range []Op{AllReduce, AllGather, ReduceScatter} {
			for _, S := range []float64{4096, 1 << 20, 8 << 20, 256 << 20} {
				ch, err := tu.Choose(op, S)
				require.NoError(t, err)
				for _, stream := range []bool{false, true} {
					got := runOne(t, NewFlowNet(sim.New(), tp), Collective{Op: op, Algorithm: NCCL, Bytes: S, Ranks: all(8), Stream: stream})
					require.InEpsilon(t, ch.TimeS(S), got, 1e-6, "%s %s %v stream=%v", p, op, S, stream)
				}
			}
		}
	}
	tp := preset(t, "dgx-a100", 1)
	k := sim.New()
	c := NewComms(NewFlowNet(k, tp))
	var res []Result
	for _, S := range []float64{1 << 20, 1 << 20, 2 << 20} {
		_, err := c.Start(Collective{Op: AllReduce, Algorithm: NCCL, Bytes: S, Ranks: all(8), Stream: true}, func(r Result) { res = append(res, r) })
		require.NoError(t, err)
	}
	require.NoError(t, k.Run(context.Background()))
	require.Len(t, c.tuners, 1, "one tuner per communicator")
	require.Len(t, c.shapes, 2, "one choice per (communicator, size)")
	require.Len(t, res, 3)
	for _, r := range res {
		require.NotNil(t, r.NCCL)
	}
	_, err := c.Start(Collective{Op: Broadcast, Algorithm: NCCL, Bytes: 1, Ranks: all(8)}, nil)
	require.Error(t, err)
}

// A ring that mixes NVLink and network hops (a data-parallel group of 4
// GPUs a node over 4 DGX H100 nodes): its streams pay NCCL's latency as the
// stepped ring does, so the two ways of running it agree where the
// latency covers the stepped ring's slowest hops. Before, a stream was
// charged the slowest hop every step while it pays the mean: an 8 MiB
// all-gather ran 8 µs (14 %) short of the stepped one.
func TestNCCLStreamPaysTheLatencyOfAMixedRing(t *testing.T) {
	tp := preset(t, "dgx-h100", 4)
	var ranks []int
	for n := range 4 {
		for _, g := range []int{0, 2, 4, 6} {
			ranks = append(ranks, 8*n+g)
		}
	}
	for _, op := range []Op{AllReduce, AllGather, ReduceScatter} {
		for _, S := range []float64{8 << 20, 256 << 20} {
			col := Collective{Op: op, Algorithm: NCCL, Bytes: S, Ranks: ranks}
			stepped := runOne(t, NewFlowNet(sim.New(), tp), col)
			col.Stream = true
			streamed := runOne(t, NewFlowNet(sim.New(), tp), col)
			require.InEpsilon(t, stepped, streamed, 1e-6, "%s %v", op, S)
		}
	}
}

// send_recv "nccl" is one transfer after NCCL's base latency, at its
// route's protocol efficiency: inside a DGX A100 node 6.6 µs + S / (300
// GB/s × 20/25) + two NVSwitch hops' 1 µs each; across DGX H100 nodes the
// route's slowest link (the 400 Gb/s NIC) at its own efficiency.
func TestNCCLSendRecvClosedForm(t *testing.T) {
	for _, c := range []struct {
		preset string
		nodes  int
		to     int
	}{{"dgx-a100", 1, 1}, {"dgx-h100", 2, 8}} {
		tp := preset(t, c.preset, c.nodes)
		path, err := tp.Route(tp.RankDevice(0), tp.RankDevice(c.to))
		require.NoError(t, err)
		bw, eff, lat := math.Inf(1), math.Inf(1), 0.0
		for _, l := range path {
			lk := tp.Links[l]
			bw = math.Min(bw, lk.BandwidthBytesPerS)
			eff = math.Min(eff, lk.BandwidthBytesPerS*linkEff(lk.Tech))
			lat += lk.LatencyS
		}
		for _, S := range []float64{2048, 1 << 20, 64 << 20} {
			k := sim.New()
			c2 := NewComms(NewFlowNet(k, tp))
			var res []Result
			_, err := c2.Start(Collective{Op: SendRecv, Algorithm: NCCL, Bytes: S, Ranks: []int{0, c.to}}, func(r Result) { res = append(res, r) })
			require.NoError(t, err)
			require.NoError(t, k.Run(context.Background()))
			require.Len(t, res, 1)
			want := NCCLBaseLatencyS + S/eff + lat
			require.InEpsilon(t, want, (res[0].End - res[0].Start).Seconds(), 1e-6, "%s %v", c.preset, S)
			require.NotNil(t, res[0].NCCL)
			require.InEpsilon(t, eff, res[0].NCCL.AlgBytesPerS, 1e-9)
			require.Less(t, eff, bw, "the route's efficiency is below its raw bandwidth")
		}
	}
}

func hwLink(t *testing.T, name string, bw float64) hw.Link {
	t.Helper()
	l, ok := hw.LinkByName(name)
	require.True(t, ok)
	l.BandwidthBytesPerS = bw
	return l
}

// HostIssue.Floor's closed forms: torch issue + channels × channel,
// nccl-tests GPUs a thread × (launch + channels × channel), none for the
// device.
func TestHostIssueFloor(t *testing.T) {
	h := HostIssue{TorchIssueS: 30e-6, LaunchS: 5e-6, ChannelS: 0.5e-6}
	require.InDelta(t, 30e-6+4*0.5e-6, h.Floor(IssueTorch, 8, 4), 1e-15)
	require.InDelta(t, 8*(5e-6+4*0.5e-6), h.Floor(IssueNCCLTests, 8, 4), 1e-15)
	require.InDelta(t, 5e-6+0.5e-6, h.Floor(IssueNCCLTests, 0, 0), 1e-15, "at least one GPU and one channel")
	require.Zero(t, h.Floor(IssueDevice, 8, 4))
	a, ok := MeasuredHost("dgx-a100", IssueNCCLTests)
	require.True(t, ok)
	require.Equal(t, 5.2e-6, a.LaunchS)
	_, ok = MeasuredHost("dgx-h100", IssueNCCLTests)
	require.False(t, ok, "no nccl-tests sweep on a DGX H100")
	_, ok = MeasuredHost("dgx-b200", IssueTorch)
	require.False(t, ok)
	require.Equal(t, []string{"dgx-a100", "dgx-h100"}, MeasuredHostPresets(IssueTorch))
	require.Equal(t, []string{"dgx-a100"}, MeasuredHostPresets(IssueNCCLTests))
}
