package net

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/topo"
)

var update = flag.Bool("update", false, "rewrite testdata/golden_collectives.txt from the code")

// goldenPath is the file TestGoldenCollectives compares with: the times,
// flow counts, wire bytes and resolved parameters of a fixed set of
// collectives, and digests of their flow records and link counters.
const goldenPath = "testdata/golden_collectives.txt"

// TestGoldenCollectives runs every operation × algorithm (by steps and as
// streams) at a few sizes on small topologies (a switch, a ring of a
// non-power-of-two size, two DGX H100 nodes, two p4d nodes with shared
// NICs), plus contended, degraded, quantized, hand-parameterized,
// all-to-all-v and refused requests, and compares what they report with
// the committed file byte for byte. A change of behaviour anywhere in the
// collective engine or its programs shows here as a diff; regenerate with
// `go test ./core/net -run TestGoldenCollectives -update` only when the
// change is meant, and review the diff.
func TestGoldenCollectives(t *testing.T) {
	got := goldenCollectives(t)
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(goldenPath), 0o755))
		require.NoError(t, os.WriteFile(goldenPath, []byte(got), 0o644))
	}
	want, err := os.ReadFile(goldenPath)
	require.NoError(t, err, "run with -update to create it")
	require.Equal(t, string(want), got)
}

type goldenTopo struct {
	name string
	make func() (*topo.Topology, error)
}

func goldenTopos() []goldenTopo {
	return []goldenTopo{
		{"switch8", func() (*topo.Topology, error) { return topo.SingleSwitch(8, testLink) }},
		{"ring6", func() (*topo.Topology, error) { return topo.Ring(6, testLink) }},
		{"dgx-h100x2", func() (*topo.Topology, error) { return topo.Preset("dgx-h100", 2) }},
		{"aws-p4dx2", func() (*topo.Topology, error) { return topo.Preset("aws-p4d", 2) }},
	}
}

// goldenRun is one kernel's worth of work: setup starts collectives (now or
// later) on c and may change the fabric; the run's results are reported in
// completion order.
type goldenRun struct {
	name    string
	tp      string
	unaware bool
	setup   func(e *goldenEnv) error
}

// goldenEnv is what a run's setup gets: the kernel, fabric and engine, start
// (which reports the collective's result when it finishes) and report (for
// what setup starts itself).
type goldenEnv struct {
	k      *sim.Kernel
	f      Fabric
	c      *Comms
	start  func(Collective) error
	report func(Result)
}

func goldenCollectives(t *testing.T) string {
	t.Helper()
	topos := map[string]func() (*topo.Topology, error){}
	var runs []goldenRun
	for _, gt := range goldenTopos() {
		topos[gt.name] = gt.make
		tp, err := gt.make()
		require.NoError(t, err)
		n := tp.NumRanks()
		for _, op := range Ops() {
			for _, alg := range Algorithms(op) {
				for _, stream := range []bool{false, true} {
					for _, size := range []float64{0, 12345, 1 << 20, 48 << 20} {
						col := Collective{Op: op, Algorithm: alg, Bytes: size, Ranks: all(n), Stream: stream, Root: 1}
						if op == SendRecv {
							col.Ranks = []int{0, n - 1}
						}
						runs = append(runs, goldenRun{name: fmt.Sprintf("%s %s stream=%v bytes=%v", op, alg, stream, size), tp: gt.name,
							setup: startOne(col)})
					}
				}
			}
		}
	}
	// Congestion-unaware fabric: every operation × algorithm once.
	for _, op := range Ops() {
		for _, alg := range Algorithms(op) {
			ranks := all(16)
			if op == SendRecv {
				ranks = []int{3, 12}
			}
			runs = append(runs, goldenRun{name: fmt.Sprintf("unaware %s %s", op, alg), tp: "dgx-h100x2", unaware: true,
				setup: startOne(Collective{Op: op, Algorithm: alg, Bytes: 3 << 20, Ranks: ranks})})
		}
	}
	perm := []int{5, 2, 7, 0, 3, 6, 1, 4}
	runs = append(runs,
		// Hand-set parameters on a permuted communicator.
		goldenRun{name: "params ring", tp: "switch8", setup: startOne(Collective{Op: AllReduce, Algorithm: Ring, Bytes: 5 << 20,
			Ranks: perm, Chunks: 3, Channels: 2, ProtocolEfficiency: 0.8})},
		goldenRun{name: "params tree", tp: "switch8", setup: startOne(Collective{Op: AllReduce, Algorithm: Tree, Bytes: 5 << 20,
			Ranks: perm, Chunks: 5, ProtocolEfficiency: 0.8})},
		goldenRun{name: "params broadcast", tp: "switch8", setup: startOne(Collective{Op: Broadcast, Algorithm: Tree, Bytes: 5 << 20,
			Ranks: perm, Root: 6, Chunks: 2})},
		goldenRun{name: "params reduce chain", tp: "aws-p4dx2", setup: startOne(Collective{Op: Reduce, Algorithm: Ring, Bytes: 7 << 20,
			Ranks: []int{9, 1, 14, 3}, Root: 3})},
		goldenRun{name: "params hd chunks", tp: "dgx-h100x2", setup: startOne(Collective{Op: AllReduce, Algorithm: HalvingDoubling,
			Bytes: 9 << 20, Ranks: all(16), Chunks: 4})},
		goldenRun{name: "params direct chunks", tp: "dgx-h100x2", setup: startOne(Collective{Op: AllGather, Algorithm: Direct,
			Bytes: 9 << 20, Ranks: all(16), Chunks: 2, ProtocolEfficiency: 0.9})},
		goldenRun{name: "params ring channels=3 stream", tp: "dgx-h100x2", setup: startOne(Collective{Op: ReduceScatter, Bytes: 9 << 20,
			Ranks: all(16), Channels: 3, Stream: true})},
		goldenRun{name: "params hierarchical subset", tp: "aws-p4dx2", setup: startOne(Collective{Op: AllReduce, Algorithm: Hierarchical,
			Bytes: 9 << 20, Ranks: []int{0, 1, 2, 3, 8, 9, 10, 11}, Chunks: 2})},
		goldenRun{name: "default algorithm", tp: "aws-p4dx2", setup: startOne(Collective{Op: AllToAll, Bytes: 2 << 20, Ranks: all(16)})},
		// Refused requests: the error is the result.
		goldenRun{name: "refused hd", tp: "ring6", setup: startOne(Collective{Op: AllReduce, Algorithm: HalvingDoubling, Bytes: 1, Ranks: all(6)})},
		goldenRun{name: "refused hierarchical", tp: "dgx-h100x2", setup: startOne(Collective{Op: AllReduce, Algorithm: Hierarchical,
			Bytes: 1, Ranks: all(10)})},
		goldenRun{name: "refused algorithm", tp: "switch8", setup: startOne(Collective{Op: Broadcast, Algorithm: Direct, Bytes: 1, Ranks: all(8)})},
		goldenRun{name: "refused nccl", tp: "switch8", setup: startOne(Collective{Op: AllToAll, Algorithm: NCCL, Bytes: 1, Ranks: all(8)})},
		goldenRun{name: "refused op", tp: "switch8", setup: startOne(Collective{Op: "gather", Bytes: 1, Ranks: all(8)})},
		goldenRun{name: "refused rank", tp: "switch8", setup: startOne(Collective{Op: AllReduce, Bytes: 1, Ranks: []int{0, 8}})},
		goldenRun{name: "refused duplicate", tp: "switch8", setup: startOne(Collective{Op: AllReduce, Bytes: 1, Ranks: []int{0, 1, 0}})},
		goldenRun{name: "refused root", tp: "switch8", setup: startOne(Collective{Op: Reduce, Bytes: 1, Ranks: all(4), Root: 4})},
		goldenRun{name: "refused send_recv", tp: "switch8", setup: startOne(Collective{Op: SendRecv, Bytes: 1, Ranks: all(3)})},
		goldenRun{name: "refused bytes", tp: "switch8", setup: startOne(Collective{Op: AllReduce, Bytes: math.NaN(), Ranks: all(3)})},
		goldenRun{name: "refused chunks", tp: "switch8", setup: startOne(Collective{Op: AllReduce, Bytes: 1, Ranks: all(3), Chunks: -1})},
		goldenRun{name: "refused channels", tp: "switch8", setup: startOne(Collective{Op: AllReduce, Bytes: 1, Ranks: all(3), Channels: -1})},
		goldenRun{name: "refused efficiency", tp: "switch8", setup: startOne(Collective{Op: AllReduce, Bytes: 1, Ranks: all(3), ProtocolEfficiency: 1.5})},
		goldenRun{name: "refused quant", tp: "switch8", setup: startOne(Collective{Op: AllReduce, Bytes: 1, Ranks: all(3), Quant: &Quantization{}})},
		// Quantized payloads, with and without kernel time.
		goldenRun{name: "quant ring", tp: "switch8", setup: startOne(Collective{Op: AllReduce, Bytes: 6 << 20, Ranks: all(8), Stream: true,
			Quant: &Quantization{ElemBytes: 2, WireElemBytes: 1, BlockElems: 128, ScaleBytes: 4,
				KernelTime: func(dev int, elems float64) sim.Time { return sim.Time(elems) * sim.Nanosecond / 100 }}})},
		goldenRun{name: "quant tree", tp: "dgx-h100x2", setup: startOne(Collective{Op: AllReduce, Algorithm: Tree, Bytes: 6 << 20, Ranks: all(16),
			Quant: &Quantization{ElemBytes: 2, WireElemBytes: 1, BlockElems: 32, ScaleBytes: 2}})},
		goldenRun{name: "quant direct", tp: "dgx-h100x2", setup: startOne(Collective{Op: AllToAll, Bytes: 6 << 20, Ranks: all(16),
			Quant: &Quantization{ElemBytes: 4, WireElemBytes: 1, BlockElems: 64, ScaleBytes: 4,
				KernelTime: func(dev int, elems float64) sim.Time { return sim.Time(dev+1) * sim.Microsecond }}})},
	)
	// Contention: the rail groups of two DGX nodes at once with a full
	// all-reduce, by steps and as streams; repeated copies of one shape
	// (the memoized path); staggered starts.
	for _, stream := range []bool{false, true} {
		runs = append(runs, goldenRun{name: fmt.Sprintf("contended rails stream=%v", stream), tp: "dgx-h100x2",
			setup: func(e *goldenEnv) error {
				for i := 0; i < 8; i++ {
					if err := e.start(Collective{Op: AllReduce, Bytes: 8 << 20, Ranks: []int{i, 8 + i}, Stream: stream}); err != nil {
						return err
					}
				}
				return e.start(Collective{Op: AllReduce, Bytes: 16 << 20, Ranks: all(16), Stream: stream})
			}})
	}
	runs = append(runs,
		goldenRun{name: "contended copies", tp: "aws-p4dx2", setup: func(e *goldenEnv) error {
			for i := 0; i < 3; i++ {
				if err := e.start(Collective{Op: AllGather, Bytes: 4 << 20, Ranks: all(16)}); err != nil {
					return err
				}
			}
			return e.start(Collective{Op: AllGather, Bytes: 4 << 20, Ranks: all(16), ProtocolEfficiency: 0.5})
		}},
		goldenRun{name: "contended staggered", tp: "switch8", setup: func(e *goldenEnv) error {
			var err error
			for i, col := range []Collective{
				{Op: AllReduce, Algorithm: Tree, Bytes: 8 << 20, Ranks: all(8)},
				{Op: Broadcast, Algorithm: Ring, Bytes: 8 << 20, Ranks: []int{3, 4, 5, 6}},
				{Op: AllReduce, Algorithm: HalvingDoubling, Bytes: 8 << 20, Ranks: []int{0, 2, 4, 6}},
				{Op: AllToAll, Bytes: 8 << 20, Ranks: all(8)},
				{Op: SendRecv, Bytes: 8 << 20, Ranks: []int{7, 0}},
			} {
				e.k.At(sim.Time(i)*20*sim.Microsecond, func() {
					if e := e.start(col); e != nil && err == nil {
						err = e
					}
				})
			}
			return err
		}},
		goldenRun{name: "contended nccl", tp: "dgx-h100x2", setup: func(e *goldenEnv) error {
			for _, b := range []float64{64 << 10, 64 << 10, 32 << 20} {
				if err := e.start(Collective{Op: AllReduce, Algorithm: NCCL, Bytes: b, Ranks: all(16)}); err != nil {
					return err
				}
			}
			return e.start(Collective{Op: ReduceScatter, Algorithm: NCCL, Bytes: 32 << 20, Ranks: all(8), Stream: true})
		}},
	)
	// Degraded links: an inter-node link at half health from the start,
	// and a link that degrades and recovers mid-run.
	for _, stream := range []bool{false, true} {
		runs = append(runs, goldenRun{name: fmt.Sprintf("degraded nic stream=%v", stream), tp: "dgx-h100x2",
			setup: func(e *goldenEnv) error {
				e.f.SetLinkHealth(interNodeLink(e.f.Topology()), 0.5)
				return e.start(Collective{Op: AllReduce, Bytes: 32 << 20, Ranks: all(16), Stream: stream})
			}})
	}
	runs = append(runs, goldenRun{name: "degraded mid-run", tp: "switch8",
		setup: func(e *goldenEnv) error {
			e.k.At(30*sim.Microsecond, func() { e.f.SetLinkHealth(3, 0.25) })
			e.k.At(200*sim.Microsecond, func() { e.f.SetLinkHealth(3, 1) })
			if err := e.start(Collective{Op: AllReduce, Bytes: 16 << 20, Ranks: all(8)}); err != nil {
				return err
			}
			return e.start(Collective{Op: AllReduce, Algorithm: Tree, Bytes: 16 << 20, Ranks: all(8)})
		}})
	// All-to-all-v, direct and hierarchical (deduplicated or not).
	for _, a := range []AllToAllV{
		{Hierarchical: false},
		{Hierarchical: true},
		{Hierarchical: true, TopK: 8, NodeLimit: 2, ProtocolEfficiency: 0.9},
	} {
		runs = append(runs, goldenRun{name: fmt.Sprintf("all_to_all_v hierarchical=%v topk=%d", a.Hierarchical, a.TopK), tp: "dgx-h100x2",
			setup: func(e *goldenEnv) error {
				a.Ranks = all(16)
				a.Bytes = make([]float64, 16*16)
				for i := range a.Bytes {
					a.Bytes[i] = float64((i*7919)%97) * 4096
				}
				return e.c.StartAllToAllV(a, e.report)
			}})
	}

	var b strings.Builder
	for _, gr := range runs {
		fmt.Fprintf(&b, "== %s | %s%s\n", gr.tp, gr.name, map[bool]string{true: " | unaware"}[gr.unaware])
		results, err := goldenOne(t, topos[gr.tp], gr, false)
		if err != nil {
			fmt.Fprintf(&b, "error: %v\n", err)
			continue
		}
		b.WriteString(results)
		// The same run with a delivery hook: every flow's record, digested.
		digest, err := goldenOne(t, topos[gr.tp], gr, true)
		require.NoError(t, err)
		b.WriteString(digest)
	}
	return b.String()
}

func startOne(col Collective) func(*goldenEnv) error {
	return func(e *goldenEnv) error { return e.start(col) }
}

// interNodeLink is the first link between devices on different nodes
// (a NIC's uplink or a leaf's port).
func interNodeLink(tp *topo.Topology) int {
	for l, lk := range tp.Links {
		if tp.Devices[lk.Src].Node != tp.Devices[lk.Dst].Node {
			return l
		}
	}
	return 0
}

// goldenOne runs gr once and formats its results, link counters and (with
// hook) a digest of its flow records.
func goldenOne(t *testing.T, mk func() (*topo.Topology, error), gr goldenRun, hook bool) (string, error) {
	t.Helper()
	tp, err := mk()
	require.NoError(t, err)
	k := sim.New()
	var f Fabric
	if gr.unaware {
		f = NewUnaware(k, tp)
	} else {
		f = NewFlowNet(k, tp)
	}
	var b strings.Builder
	h := sha256.New()
	flows := 0
	if hook {
		f.OnDeliver(func(r FlowRecord) {
			flows++
			var buf []byte
			for _, v := range []int64{r.ID, int64(r.Src), int64(r.Dst), int64(math.Float64bits(r.Bytes)), int64(r.Start),
				int64(r.TxEnd), int64(r.Delivered), int64(r.Hops), int64(r.Tag)} {
				buf = binary.LittleEndian.AppendUint64(buf, uint64(v))
			}
			h.Write(buf)
		})
	}
	c := NewComms(f)
	report := func(r Result) { writeResult(&b, r) }
	start := func(col Collective) error {
		_, err := c.Start(col, report)
		return err
	}
	if err := gr.setup(&goldenEnv{k: k, f: f, c: c, start: start, report: report}); err != nil {
		return "", err
	}
	if err := k.Run(context.Background()); err != nil {
		return "", err
	}
	fmt.Fprintf(&b, "end %d\n", k.Now())
	lh := sha256.New()
	for _, s := range f.LinkStats() {
		var buf []byte
		for _, v := range []uint64{uint64(s.Src), uint64(s.Dst), math.Float64bits(s.Bytes), uint64(s.Busy), uint64(s.PeakFlows)} {
			buf = binary.LittleEndian.AppendUint64(buf, v)
		}
		lh.Write(buf)
	}
	fmt.Fprintf(&b, "links %x\n", lh.Sum(nil)[:12])
	if hook {
		return fmt.Sprintf("flows %d %x\n", flows, h.Sum(nil)[:12]), nil
	}
	return b.String(), nil
}

func writeResult(b *strings.Builder, r Result) {
	col := r.Collective
	fmt.Fprintf(b, "result id=%d %s %s n=%d bytes=%s channels=%d chunks=%d eff=%s start=%d end=%d flows=%d wire=%s",
		r.ID, col.Op, col.Algorithm, len(col.Ranks), fg(col.Bytes), col.Channels, col.Chunks, fg(col.ProtocolEfficiency),
		r.Start, r.End, r.Flows, fg(r.WireBytes))
	if ch := r.NCCL; ch != nil {
		fmt.Fprintf(b, " nccl=%+v", *ch)
	}
	b.WriteByte('\n')
}

func fg(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
