package bench

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/eidolon-sim/eidolon/bench/fidelity"

	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/topo"
)

// ringAllReduce runs one ring all-reduce of `bytes` over every GPU of a
// dgx-h100 cluster of `nodes` nodes with congestion (FlowNet). railAligned
// orders the ring as NCCL's topology search does: every other node is
// traversed backwards, so each inter-node hop joins GPUs of the same local
// index (one rail, one leaf; the spine only between leaf groups). Otherwise
// the ring is node-major (gpu7 of node k to gpu0 of node k+1: every
// inter-node hop crosses rails through the spine, and ECMP collisions there
// tie many flows into one max-min component).
//
// channels 1 is one ring (2·n·(n−1) flows); 0 is the default, one ring per
// rail across nodes (8× the flows).
func ringAllReduce(b *testing.B, nodes int, bytes float64, railAligned bool, channels int) (events uint64, flows int, simTime float64) {
	tp, err := topo.Preset("dgx-h100", nodes)
	if err != nil {
		b.Fatal(err)
	}
	k := sim.New()
	f := net.NewFlowNet(k, tp)
	c := net.NewComms(f)
	ranks := make([]int, 0, tp.NumRanks())
	for n := 0; n < nodes; n++ {
		for g := 0; g < 8; g++ {
			if railAligned && n%2 == 1 {
				ranks = append(ranks, n*8+7-g)
			} else {
				ranks = append(ranks, n*8+g)
			}
		}
	}
	var res net.Result
	if _, err := c.Start(net.Collective{Op: net.AllReduce, Algorithm: net.Ring, Bytes: bytes, Ranks: ranks, Channels: channels},
		func(r net.Result) { res = r }); err != nil {
		b.Fatal(err)
	}
	if err := k.Run(context.Background()); err != nil {
		b.Fatal(err)
	}
	return k.Events(), res.Flows, (res.End - res.Start).Seconds()
}

func benchRing(b *testing.B, nodes int, railAligned bool, channels int) {
	var ev uint64
	var flows int
	for i := 0; i < b.N; i++ {
		ev, flows, _ = ringAllReduce(b, nodes, 1<<30, railAligned, channels)
	}
	perOp := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(flows), "flows")
	b.ReportMetric(float64(ev)/perOp, "events/s")
	b.ReportMetric(perOp/float64(flows)*1e9, "ns/flow")
}

// BenchmarkRingAllReduce: 1 GiB rail-aligned ring all-reduce (one ring)
// over 8·nodes GPUs; ns/flow across sizes shows how cost grows with the
// flow count.
// Run: go test ./bench -run '^$' -bench 'RingAllReduce/gpus=1024$' -benchtime 1x
func BenchmarkRingAllReduce(b *testing.B) {
	for _, nodes := range []int{16, 128, 512, 1024} {
		b.Run(fmt.Sprintf("gpus=%d", nodes*8), func(b *testing.B) { benchRing(b, nodes, true, 1) })
	}
}

// BenchmarkRingAllReduceChannels: the same with the default channels (one
// ring per rail: 8 on dgx-h100, each carrying 1/8 of the data), as a
// collective spec without "channels" runs it.
// Run: go test ./bench -run '^$' -bench 'RingAllReduceChannels/gpus=1024$' -benchtime 1x
func BenchmarkRingAllReduceChannels(b *testing.B) {
	for _, nodes := range []int{16, 128} {
		b.Run(fmt.Sprintf("gpus=%d", nodes*8), func(b *testing.B) { benchRing(b, nodes, true, 0) })
	}
}

// BenchmarkRingAllReduceNodeMajor: one ring in node-major order (every
// inter-node hop through the spine).
// Run: go test ./bench -run '^$' -bench 'RingAllReduceNodeMajor/gpus=1024$' -benchtime 1x
func BenchmarkRingAllReduceNodeMajor(b *testing.B) {
	for _, nodes := range []int{16, 128} {
		b.Run(fmt.Sprintf("gpus=%d", nodes*8), func(b *testing.B) { benchRing(b, nodes, false, 1) })
	}
}

// BenchmarkDirect: direct collectives of 256 MiB over every GPU of a
// dgx-h100 cluster, each pair of ranks its own flow (n·(n−1) a phase).
// Past one leaf, ECMP spreads the flows' rates over the spine and they end
// in hundreds of distinct instants. An all-to-all's departures change no
// rate (the fastest leave first), which the fill record sees without
// filling again; the all-reduce's second phase starts rank by rank, each
// start a whole filling, and its departures refill only the flows fixed
// at or above the lowest share that left (core/net fillRecord). Before the
// record, the all-to-all took 7 s on 256 GPUs and about 120 s on 512, the
// all-reduce 184 s on 256.
// Run: go test ./bench -run '^$' -bench 'Direct' -benchtime 1x
func BenchmarkDirect(b *testing.B) {
	for _, tc := range []struct {
		op    net.Op
		nodes []int
	}{{net.AllToAll, []int{32, 64, 128}}, {net.AllReduce, []int{32}}} {
		for _, nodes := range tc.nodes {
			b.Run(fmt.Sprintf("%s/gpus=%d", tc.op, nodes*8), func(b *testing.B) {
				tp, err := topo.Preset("dgx-h100", nodes)
				if err != nil {
					b.Fatal(err)
				}
				ranks := make([]int, tp.NumRanks())
				for i := range ranks {
					ranks[i] = i
				}
				var flows int
				for i := 0; i < b.N; i++ {
					k := sim.New()
					c := net.NewComms(net.NewFlowNet(k, tp))
					if _, err := c.Start(net.Collective{Op: tc.op, Algorithm: net.Direct, Bytes: 1 << 28, Ranks: ranks},
						func(r net.Result) { flows = r.Flows }); err != nil {
						b.Fatal(err)
					}
					if err := k.Run(context.Background()); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(flows), "flows")
			})
		}
	}
}

// ncclH100RingBusbw is NCCL's ring all-reduce bus bandwidth on HGX-H100 for
// large messages: "450GB/s is the line rate. With the protocol overhead
// (~20%) NCCL can get an effective NVLink bandwidth of 370GB/s, which you
// can observe as BusBw ... when running with NCCL_ALGO=RING" (S. Jeaugey,
// NVIDIA, github.com/NVIDIA/nccl-tests/issues/212, 2024). The ASTRA-sim
// validation page reports the same machine's maximum as 741.34 GB/s
// bidirectional, i.e. 370.7 GB/s per direction
// (astra-sim.github.io/astra-sim-docs/validation/hardware/gpu-validation-hgx-h100.html).
const ncclH100RingBusbw = 370e9

// nvlinkProtocolEfficiency is the one mechanism added to the link model for
// NCCL: the fraction of NVLink time carrying payload, 370/450, from the same
// NVIDIA statement. It applies to every row alike; nothing is fitted per row.
const nvlinkProtocolEfficiency = 370.0 / 450.0

// FidelityRow is one line of the NCCL comparison table.
type FidelityRow struct {
	GPUs      int
	SizeBytes float64
	// Busbw of the reference, of Eidolon without and with the protocol
	// efficiency, in bytes/s; Error is |eidolon − reference| / reference.
	ReferenceBusbw, IdealBusbw, EidolonBusbw, Error float64
	AstraSimGeomeanError                            float64
	// TunerBusbw is what the NCCL tuner (the model training and inference
	// use) gives a ring (NCCL_ALGO=RING), TunerError its error.
	TunerBusbw, TunerError float64
}

func ringBusbwH100(tb testing.TB, gpus int, size, efficiency float64) float64 {
	tp, err := topo.Preset("dgx-h100", 1)
	if err != nil {
		tb.Fatal(err)
	}
	k := sim.New()
	c := net.NewComms(net.NewFlowNet(k, tp))
	ranks := make([]int, gpus)
	for i := range ranks {
		ranks[i] = i
	}
	var res net.Result
	if _, err := c.Start(net.Collective{Op: net.AllReduce, Algorithm: net.Ring, Bytes: size, Ranks: ranks,
		ProtocolEfficiency: efficiency}, func(r net.Result) { res = r }); err != nil {
		tb.Fatal(err)
	}
	if err := k.Run(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return size / (res.End - res.Start).Seconds() * net.BusBandwidthFactor(net.AllReduce, gpus)
}

// tunerRingBusbwH100 is the NCCL tuner's ring bus bandwidth (its choice
// restricted to rings, as NCCL_ALGO=RING does) on one dgx-h100 node; an
// uncontended collective of algorithm "nccl" takes exactly its time
// (core/net TestNCCLCollectiveClosedForm).
func tunerRingBusbwH100(tb testing.TB, gpus int, size float64) float64 {
	tp, err := topo.Preset("dgx-h100", 1)
	if err != nil {
		tb.Fatal(err)
	}
	ranks := make([]int, gpus)
	for i := range ranks {
		ranks[i] = i
	}
	tu, err := net.NewNCCLTuner(tp, ranks)
	if err != nil {
		tb.Fatal(err)
	}
	ch, err := tu.ChooseFrom(net.AllReduce, size, net.Ring)
	if err != nil {
		tb.Fatal(err)
	}
	return size / ch.TimeS(size) * net.BusBandwidthFactor(net.AllReduce, gpus)
}

// NCCLFidelity computes the comparison table (ring all-reduce on one
// dgx-h100 node, NVSwitch at the nvlink4 preset's 450 GB/s and 1 µs).
// The reference is NCCL's large-message figure, so the rows are large
// messages only; no per-size NCCL table for H100 was found to check the
// latency-bound sizes.
func NCCLFidelity(tb testing.TB) []FidelityRow {
	var rows []FidelityRow
	for _, gpus := range []int{2, 4, 8} {
		for _, size := range []float64{1 << 30, 8 << 30} {
			ours := ringBusbwH100(tb, gpus, size, nvlinkProtocolEfficiency)
			tuned := tunerRingBusbwH100(tb, gpus, size)
			rows = append(rows, FidelityRow{GPUs: gpus, SizeBytes: size, ReferenceBusbw: ncclH100RingBusbw,
				IdealBusbw: ringBusbwH100(tb, gpus, size, 1), EidolonBusbw: ours,
				Error: math.Abs(ours-ncclH100RingBusbw) / ncclH100RingBusbw, AstraSimGeomeanError: fidelity.AstraSimHGXH100[gpus] / 100,
				TunerBusbw: tuned, TunerError: math.Abs(tuned-ncclH100RingBusbw) / ncclH100RingBusbw})
		}
	}
	return rows
}

// TestNCCLFidelityReport prints the table (go test ./bench -run NCCLFidelity -v)
// and checks every row beats ASTRA-sim's error for its GPU count.
func TestNCCLFidelityReport(t *testing.T) {
	t.Log("ring all-reduce busbw on HGX-H100, GB/s: NCCL (ref) | eidolon ideal protocol | eidolon | error | NCCL tuner (ring) | error | ASTRA-sim geomean error")
	for _, r := range NCCLFidelity(t) {
		t.Logf("%d GPUs %5.0f MiB: %6.1f | %6.1f | %6.1f | %5.2f%% | %6.1f | %5.2f%% | %5.2f%%", r.GPUs, r.SizeBytes/(1<<20),
			r.ReferenceBusbw/1e9, r.IdealBusbw/1e9, r.EidolonBusbw/1e9, 100*r.Error, r.TunerBusbw/1e9, 100*r.TunerError, 100*r.AstraSimGeomeanError)
		if r.Error >= r.AstraSimGeomeanError {
			t.Errorf("%d GPUs: error %.2f%% not below ASTRA-sim's %.2f%%", r.GPUs, 100*r.Error, 100*r.AstraSimGeomeanError)
		}
		// The tuner on 8 GPUs (the machine the statement is about) is held
		// to 5 %; on 2 and 4 GPUs its Simple ring is bounded by its
		// kernels' memory traffic (4 and 3.33 bytes per byte sent against
		// 3.14 on 8: Vidur's h100_dgx 2/2 measures ~310 GB/s), and it only
		// has to beat ASTRA-sim.
		if r.GPUs == 8 && r.TunerError > 0.05 || r.TunerError >= r.AstraSimGeomeanError {
			t.Errorf("%d GPUs: NCCL tuner error %.2f%%", r.GPUs, 100*r.TunerError)
		}
	}
}
