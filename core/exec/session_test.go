package exec

import (
	"context"
	"testing"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/workload"
	"github.com/stretchr/testify/require"
)

// pairPlan is two one-rank units linked unit 0 → unit 1 (pipeline slots).
// Unit 0 computes a 1 ms kernel (the head of its program when first) then
// sends; unit 1 computes 1 µs, then receives and issues n 1 µs kernels
// after the receipt (no host synchronisation on it: its host runs ahead).
func pairPlan(first, second bool, n int) *workload.Plan {
	op := func(name string) model.Op { return model.Op{Name: name, Kind: model.Elementwise, Pass: model.Forward} }
	tiny := make([]model.Op, n)
	for i := range tiny {
		tiny[i] = op("k")
	}
	var p0, p1 []workload.Task
	if first {
		p0 = append(p0, workload.Task{Name: "long", Kind: workload.Compute, Stream: workload.StreamCompute, Ops: []model.Op{op("long")}})
		p1 = append(p1, workload.Task{Name: "short", Kind: workload.Compute, Stream: workload.StreamCompute, Ops: []model.Op{op("k")}})
	}
	if second {
		send := workload.Task{Name: "send", Kind: workload.Send, Stream: workload.StreamPP, Coll: workload.SendRecv, Bytes: 1e3, Slot: workload.SlotFwdOut, Tag: 1}
		if first {
			send.Deps = []int32{0}
		}
		p0 = append(p0, send)
		recv := workload.Task{Name: "recv", Kind: workload.Recv, Stream: workload.StreamPP, Coll: workload.SendRecv, Bytes: 1e3, Slot: workload.SlotFwdIn, Tag: 1}
		p1 = append(p1, recv)
		after := workload.Task{Name: "after", Kind: workload.Compute, Stream: workload.StreamCompute, Ops: tiny, Deps: []int32{int32(len(p1) - 1)}}
		p1 = append(p1, after)
	}
	pl := &workload.Plan{Programs: []workload.Program{{Tasks: p0}, {Tasks: p1}}, Ranks: 2,
		Groups: []workload.Group{{Units: []int{0, 1}, Comms: [][]int{{0, 1}}}}, Replicas: [][]int{{0, 1}}}
	for u := range 2 {
		unit := workload.Unit{Program: u, Ranks: []int{u}, Stage: u}
		for i := range unit.Groups {
			unit.Groups[i] = -1
		}
		pl.Units = append(pl.Units, unit)
	}
	pl.Units[0].Groups[workload.SlotFwdOut] = 0
	pl.Units[1].Groups[workload.SlotFwdIn] = 0
	return pl
}

// A plan run as two plans on a session, the second resumed from the
// first, gives the times of the one plan: unit 1's host, idle since 1 µs,
// has issued its tiny kernels long before the receipt, so they run back to
// back after it; resumed at the second plan's start instead, its host
// would pay their issue after the receipt.
func TestSessionResumesWhereOnePlanWould(t *testing.T) {
	const n = 50
	k := func(o model.Op) (Kernel, error) {
		if o.Name == "long" {
			return Kernel{DeviceS: 1e-3, Kernels: 1}, nil
		}
		return Kernel{DeviceS: 1e-6, Kernels: 1}, nil
	}
	opt := func() Options { return Options{Fabric: dgx(t, 1), Kernel: k, Host: Host{Mode: Eager}} }
	whole, err := Run(context.Background(), pairPlan(true, true, n), opt())
	require.NoError(t, err)

	split := func(resume bool) sim.Time {
		a, b := pairPlan(true, false, n), pairPlan(false, true, n)
		s, err := NewSession(context.Background(), a, opt())
		require.NoError(t, err)
		ra, err := s.Run(context.Background(), a, nil)
		require.NoError(t, err)
		var from *Resume
		if resume {
			from = &Resume{Host: []sim.Time{ra.Units[0].Host, ra.Units[1].Host}}
		}
		rb, err := s.Run(context.Background(), b, from)
		require.NoError(t, err)
		if resume {
			require.Equal(t, whole.Units[1].Start[1:], rb.Units[1].Start)
			require.Equal(t, whole.Units[1].End[1:], rb.Units[1].End)
		}
		return rb.End
	}
	require.Equal(t, whole.End, split(true))
	require.Greater(t, split(false), whole.End+sim.Seconds(30*HostForwardOpS), "a host resumed late pays the issue")
}

// The set-up routes every communicator (minutes on half a million GPUs):
// a canceled context stops it, in NewSession and in Simulated, where it
// once ran to the end before the run noticed.
func TestSetupStopsWhenCanceled(t *testing.T) {
	cfg, ok := model.FromPreset("gpt-22b", model.Config{Layers: 4})
	require.True(t, ok)
	tr := workload.Training{Model: cfg, SeqLen: 1024, DType: hw.BF16,
		Par: workload.Parallel{TP: 4, PP: 2, DP: 16, MicroBatch: 1, GlobalBatch: 16, Schedule: workload.Schedule("1f1b"), VirtualStages: 1}}
	plan, err := workload.BuildTraining(tr)
	require.NoError(t, err)
	opt := Options{Fabric: dgx(t, 16), Cost: fixedCost}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = NewSession(ctx, plan.Plan, opt)
	require.ErrorIs(t, err, context.Canceled)
	_, err = Simulated(ctx, plan.Plan, opt)
	require.ErrorIs(t, err, context.Canceled)

	s, err := NewSession(context.Background(), plan.Plan, opt)
	require.NoError(t, err)
	require.NotNil(t, s)
}
