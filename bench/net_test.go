package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/topo"
)

// ringAllReduce runs one ring all-reduce of `bytes` over every GPU of a
// dgx-h100 cluster of `nodes` nodes with congestion (FlowNet).
func ringAllReduce(b *testing.B, nodes int, bytes float64) (events uint64, flows int, simTime float64) {
	tp, err := topo.Preset("dgx-h100", nodes)
	if err != nil {
		b.Fatal(err)
	}
	k := sim.New()
	f := net.NewFlowNet(k, tp)
	c := net.NewComms(f)
	ranks := make([]int, tp.NumRanks())
	for i := range ranks {
		ranks[i] = i
	}
	var res net.Result
	if _, err := c.Start(net.Collective{Op: net.AllReduce, Algorithm: net.Ring, Bytes: bytes, Ranks: ranks}, func(r net.Result) { res = r }); err != nil {
		b.Fatal(err)
	}
	if err := k.Run(context.Background()); err != nil {
		b.Fatal(err)
	}
	return k.Events(), res.Flows, (res.End - res.Start).Seconds()
}

// BenchmarkRingAllReduce: 1 GiB ring all-reduce over 8·nodes GPUs.
// Run: go test ./bench -run '^$' -bench RingAllReduce -benchtime 1x
func BenchmarkRingAllReduce(b *testing.B) {
	for _, nodes := range []int{16, 128, 512, 1024} {
		b.Run(fmt.Sprintf("gpus=%d", nodes*8), func(b *testing.B) {
			var ev uint64
			var flows int
			for i := 0; i < b.N; i++ {
				ev, flows, _ = ringAllReduce(b, nodes, 1<<30)
			}
			b.ReportMetric(float64(flows), "flows")
			b.ReportMetric(float64(ev)/b.Elapsed().Seconds()*float64(b.N), "events/s")
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)/float64(flows)*1e9, "ns/flow")
		})
	}
}
