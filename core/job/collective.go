package job

import (
	"context"
	"math"

	"github.com/eidolon-sim/eidolon/core/compile"
	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/eidolon-sim/eidolon/core/problem"
	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/eidolon-sim/eidolon/core/topo"
)

// CollectiveRun is one (algorithm, size) of a collective spec simulated:
// what the collective kind tabulates and a fault sweep over it measures.
type CollectiveRun struct {
	Topology *topo.Topology
	Fabric   net.Fabric
	// Faults is the fault schedule; Groups the communicators' ranks.
	Faults []net.FaultEvent
	Groups [][]int
	// Started lists each collective's id and start, in start order;
	// Results each one's result, in completion order.
	Started []StartedCollective
	Results []net.Result
	// Flows are the delivered transfers, when asked for.
	Flows []net.FlowRecord
}

// StartedCollective is a collective's id and start time.
type StartedCollective struct {
	ID int
	At sim.Time
}

// End is when the last collective finished.
func (r *CollectiveRun) End() sim.Time {
	var end sim.Time
	for _, res := range r.Results {
		end = max(end, res.End)
	}
	return end
}

// HostFloor is the shortest the run's call lasts as the spec's issue mode
// issues it back to back (0 for "device"): the host's part on the channels
// the call ran on (NCCL's choice, else the spec's channels).
func (r *CollectiveRun) HostFloor(cs *spec.Collective) float64 {
	if cs.Host == nil {
		return 0
	}
	ch := max(cs.Channels, 1)
	for _, res := range r.Results {
		if res.NCCL != nil {
			ch = res.NCCL.Channels
		}
	}
	return cs.Host.HostIssue().Floor(cs.Issue, cs.GPUsPerThread, ch)
}

// CheckCollective makes a collective run's checks before it simulates: the
// cluster and faults compiled, the groups' ranks against it. prefix is the
// spec's path in the document.
func CheckCollective(prefix string, cs *spec.Collective) error {
	f, _, _, err := compile.Fabric(prefix, cs.Cluster, cs.Faults, cs.Seed, cs.Model)
	if err != nil {
		return err
	}
	_, err = CollectiveGroups(prefix, cs, f.Topology())
	return err
}

// RunCollective simulates algorithm alg at size bytes of a validated
// collective spec at prefix, on a fresh cluster with the spec's faults and
// then extra ones (of the same cluster's ids): Concurrent copies on every
// group, all started at time 0. flows records the delivered transfers.
// Building a large cluster and starting a collective over many ranks are
// long: both poll ctx.
func RunCollective(ctx context.Context, prefix string, cs *spec.Collective, alg string, size float64,
	extra net.FaultPlan, flows bool) (*CollectiveRun, error) {
	t, err := compile.TopologyContext(ctx, prefix, cs.Cluster)
	if err != nil {
		return nil, err
	}
	plan, err := compile.Faults(prefix, cs.Faults, t)
	if err != nil {
		return nil, err
	}
	f, comms, faults, err := net.Build(sim.New(), t, plan.With(extra), cs.Seed, cs.Model)
	if err != nil {
		return nil, err
	}
	before221, err := net.NCCLReleaseBefore221(cs.NCCLVersion)
	if err != nil {
		return nil, err
	}
	comms.SetNCCLBefore221(before221)
	k := f.Kernel()
	k.Watch(ctx)
	groups, err := CollectiveGroups(prefix, cs, t)
	if err != nil {
		return nil, err
	}
	run := &CollectiveRun{Topology: t, Fabric: f, Faults: faults, Groups: groups}
	if flows {
		f.OnDeliver(func(r net.FlowRecord) { run.Flows = append(run.Flows, r) })
	}
	var q *net.Quantization
	if sq := cs.Quantization; sq != nil {
		q = &net.Quantization{ElemBytes: sq.ElemBytes, WireElemBytes: 1, BlockElems: sq.BlockElems, ScaleBytes: sq.ScaleBytes}
	}
	for _, g := range groups {
		for c := 0; c < cs.Concurrent; c++ {
			col := net.Collective{Op: net.Op(cs.Collective), Algorithm: net.Algorithm(alg), Bytes: size,
				Ranks: g, Root: cs.Root, Chunks: cs.Chunks, Channels: cs.Channels, Quant: q, ProtocolEfficiency: cs.ProtocolEfficiency,
				Stream: cs.Ring == "stream"}
			id, err := comms.Start(col, func(r net.Result) { run.Results = append(run.Results, r) })
			if err != nil {
				return nil, err
			}
			run.Started = append(run.Started, StartedCollective{ID: id, At: k.Now()})
		}
	}
	// Check cancellation between events (every CheckEvery events).
	if err := k.Run(ctx); err != nil {
		return nil, err
	}
	return run, nil
}

// CollectiveGroups returns the groups to run (the spec's, or one
// rail-aligned group of every rank), each rank checked against the
// cluster's (a problem at prefix.group[i] or prefix.groups[g][i]).
func CollectiveGroups(prefix string, cs *spec.Collective, tp *topo.Topology) ([][]int, error) {
	groups := cs.Groups
	if groups == nil {
		g := cs.Group
		if len(g) == 0 {
			g = RailAligned(tp)
		}
		groups = [][]int{g}
	}
	var p problem.Problems
	smallest := math.MaxInt
	for gi, g := range groups {
		smallest = min(smallest, len(g))
		for i, r := range g {
			if r >= tp.NumRanks() {
				path := problem.Index("group", i)
				if cs.Groups != nil {
					path = problem.Index(problem.Index("groups", gi), i)
				}
				p.Addf(path, "rank must be < %d (the cluster's rank count), got %d", tp.NumRanks(), r)
			}
		}
	}
	if cs.Root >= smallest {
		p.Addf("root", "must be an index into every communicator, < %d (its ranks), got %d", smallest, cs.Root)
	}
	return groups, problem.Under(prefix, p.Err())
}

// RailAligned lists every rank node by node, every other node backwards, so
// a ring in this order crosses between nodes on GPUs of the same local index
// (one rail: no spine hop on a rail-optimized fabric), as NCCL orders its
// rings. Ranks outside nodes keep their order.
func RailAligned(tp *topo.Topology) []int {
	all := make([]int, tp.NumRanks())
	for i := range all {
		all[i] = i
	}
	var order []int
	for gi, g := range tp.NodesOfRanks(all) {
		for j := range g {
			if gi%2 == 1 {
				j = len(g) - 1 - j
			}
			order = append(order, g[j])
		}
	}
	return order
}
