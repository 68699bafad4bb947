package exec

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/topo"
	"github.com/eidolon-sim/eidolon/core/workload"
)

// An expert-parallel all-to-all-v of b bytes per pair over the 8 GPUs of a
// DGX A100, run with the options every scenario runs with
// (Machine.Options), pays what a send/recv pays, by the same code
// (engine.launch charges CollectiveLaunchS to every collective NCCL's
// tuner does not price): the host's issue of the NCCL call, NCCL's base
// latency, then its pairs at once as flows (NCCL's grouped
// ncclSend/ncclRecv run in one kernel, the 7 peers of 8 ranks in one
// batch of NCCL_MAX_DEV_WORK_P2P_PER_BATCH = 8 rounds per channel,
// src/enqueue.cc addP2pToPlan / ncclAddWorkBatchToPlan). Every GPU's
// NVLink port carries its 7 pairs at the links' protocol efficiency:
// T = HostCollectiveS + net.NCCLBaseLatencyS + 7·b / (eff·B) + path latency.
// Dropping the base latency takes 6.6 µs off the 46.7 µs and fails it.
func TestAllToAllVPaysNCCLLatencyClosedForm(t *testing.T) {
	const n, b = 8, 1 << 20
	tp, g, pairs := dgxA100Dispatch(t, n, b)
	m, err := NewMachine(tp, g, net.FaultPlan{}, 1)
	require.NoError(t, err)
	plan := onePlan(0, 0)
	plan.Programs[0].Tasks = []workload.Task{{Name: "dispatch", Kind: workload.Collective, Stream: workload.StreamEP,
		Coll: workload.AllToAllV, Bytes: n * n * b, Slot: workload.SlotEP, Pairs: pairs}}
	plan.Units[0].Groups[workload.SlotTP] = -1
	plan.Units[0].Groups[workload.SlotEP] = 0

	path, err := tp.Route(tp.RankDevice(0), tp.RankDevice(1))
	require.NoError(t, err)
	var pathLat float64
	bw := tp.Links[path[0]].BandwidthBytesPerS
	for _, l := range path {
		pathLat += tp.Links[l].LatencyS
		bw = min(bw, tp.Links[l].BandwidthBytesPerS)
	}
	link, ok := hw.LinkByName("nvlink3")
	require.True(t, ok)
	want := HostCollectiveS + net.NCCLBaseLatencyS + (n-1)*b/(link.CollectiveEfficiency*bw) + pathLat

	res, err := Run(context.Background(), plan, m.Options(false))
	require.NoError(t, err)
	require.InEpsilon(t, want, res.End.Seconds(), 1e-6)
	require.InEpsilon(t, HostCollectiveS, res.Units[0].Start[0].Seconds(), 1e-6, "the host issues the call")
	require.InEpsilon(t, want-HostCollectiveS, (res.Units[0].End[0] - res.Units[0].Start[0]).Seconds(), 1e-6)
}

// An all-to-all-v's duration is reused only from a run no data-parallel
// collective overlapped: four dispatches in a row on a DGX A100, the first
// two under a 16 MiB gradient all-reduce over the same NVLink ports, the
// last two after it. The first is slower; the last takes exactly a lone
// dispatch's time (reusing the first's would make it as slow): the
// contended runs and the first quiet one are simulated, the last reuses
// the quiet one.
func TestAllToAllVMemoSkipsContendedRuns(t *testing.T) {
	const n, b = 8, 8 << 20
	tp, g, pairs := dgxA100Dispatch(t, n, b)
	dispatches := func(gradient bool) (*Result, []workload.Task) {
		m, err := NewMachine(tp, g, net.FaultPlan{}, 1)
		require.NoError(t, err)
		plan := onePlan(0, 0)
		var tasks []workload.Task
		if gradient {
			tasks = append(tasks, workload.Task{Name: "grad_all_reduce", Kind: workload.Collective, Stream: workload.StreamDP,
				Coll: model.AllReduce, Bytes: 16 << 20, Slot: workload.SlotDP})
		}
		for i := 0; i < 4; i++ {
			t := workload.Task{Name: "dispatch", Kind: workload.Collective, Stream: workload.StreamEP,
				Coll: workload.AllToAllV, Bytes: n * n * b, Slot: workload.SlotEP, Pairs: pairs, Tag: int32(i)}
			if i > 0 {
				t.Deps = []int32{int32(len(tasks) - 1)}
			}
			if i > 1 && gradient {
				t.Deps = append(t.Deps, 0) // after the reduction
			}
			tasks = append(tasks, t)
		}
		plan.Programs[0].Tasks = tasks
		plan.Units[0].Groups[workload.SlotTP] = -1
		plan.Units[0].Groups[workload.SlotEP] = 0
		plan.Units[0].Groups[workload.SlotDP] = 0
		res, err := Run(context.Background(), plan, m.Options(false))
		require.NoError(t, err)
		return res, tasks
	}
	lone, _ := dispatches(false)
	alone := lone.Units[0].End[0] - lone.Units[0].Start[0]
	res, tasks := dispatches(true)
	first, last := 1, len(tasks)-1
	require.Greater(t, res.Units[0].End[first]-res.Units[0].Start[first], alone)
	require.Equal(t, alone, res.Units[0].End[last]-res.Units[0].Start[last])
	require.Equal(t, 4, res.Collectives, "the reduction, the two contended dispatches and the first quiet one")
	require.Equal(t, 1, res.Reused)
}

// dgxA100Dispatch is one DGX A100, its GPU, and an all-to-all-v matrix of
// b bytes between every pair of its n ranks.
func dgxA100Dispatch(t *testing.T, n int, b float64) (*topo.Topology, hw.GPU, []float64) {
	tp, err := topo.Preset("dgx-a100", 1)
	require.NoError(t, err)
	g, ok := hw.GPUByName("a100-80gb-sxm")
	require.True(t, ok)
	pairs := make([]float64, n*n)
	for i := range pairs {
		pairs[i] = b
	}
	return tp, g, pairs
}

// A pipeline stage's send, run with the options every scenario runs with,
// takes what the collective kind's send_recv "nccl" takes on the same
// cluster (net.NCCLBaseLatencyS, then the bytes at the route's protocol
// efficiency): the executor's one flow and net's request are one price.
func TestSendIsNetsSendRecvNCCL(t *testing.T) {
	for _, S := range []float64{16 << 10, 64 << 20} {
		tp, g, _ := dgxA100Dispatch(t, 2, 0)
		k := sim.New()
		c := net.NewComms(net.NewFlowNet(k, tp))
		var want float64
		_, err := c.Start(net.Collective{Op: net.SendRecv, Algorithm: net.NCCL, Bytes: S, Ranks: []int{0, 1}},
			func(r net.Result) { want = (r.End - r.Start).Seconds() })
		require.NoError(t, err)
		require.NoError(t, k.Run(context.Background()))

		m, err := NewMachine(tp, g, net.FaultPlan{}, 1)
		require.NoError(t, err)
		plan := pairPlan(false, true, 0)
		for p := range plan.Programs {
			plan.Programs[p].Tasks[0].Bytes = S
		}
		res, err := Run(context.Background(), plan, m.Options(false))
		require.NoError(t, err)
		require.InEpsilon(t, want, (res.Units[1].End[0] - res.Units[0].Start[0]).Seconds(), 1e-6, "%v bytes", S)
	}
}

// A hierarchical all-to-all-v (DeepEP's normal kernels) holds DeepEPSMs
// of the compute beside it, a flat one (NCCL's) Interference.CTAs: a
// dispatch of 1 MiB a pair on a DGX A100 beside a 10 ms math-bound task
// stretches it by 108/88 or 108/84 while in flight.
func TestDeepEPHoldsItsSMs(t *testing.T) {
	const n, b = 8, 1 << 20
	tp, _, pairs := dgxA100Dispatch(t, n, b)
	cost := func(model.Op) (float64, error) { return 10e-3, nil }
	for _, hier := range []bool{false, true} {
		plan := onePlan(0, 0)
		plan.Programs[0].Tasks = []workload.Task{
			{Name: "dispatch", Kind: workload.Collective, Stream: workload.StreamEP, Coll: workload.AllToAllV,
				Bytes: n * n * b, Slot: workload.SlotEP, Pairs: pairs, Hierarchical: hier},
			{Name: "experts", Kind: workload.Compute, Stream: workload.StreamCompute, Ops: []model.Op{{Name: "gemm", Kind: model.GEMM}}}}
		plan.Units[0].Groups[workload.SlotTP] = -1
		plan.Units[0].Groups[workload.SlotEP] = 0
		in := &Interference{SMs: 108, CTAs: NCCLCTAs}
		res, err := Run(context.Background(), plan, Options{Fabric: net.NewFlowNet(sim.New(), tp), Cost: cost, Interference: in})
		require.NoError(t, err)
		a := (res.Units[0].End[0] - res.Units[0].Start[0]).Seconds()
		require.Less(t, a, 10e-3)
		held := NCCLCTAs
		if hier {
			held = DeepEPSMs
		}
		f := 108.0 / float64(108-held)
		require.InEpsilon(t, a+(10e-3-a/f), (res.Units[0].End[1] - res.Units[0].Start[1]).Seconds(), 1e-6, "hierarchical %v", hier)
	}
}
