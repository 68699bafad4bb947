// Package compile is the one step between the input language and the
// models: it turns a validated spec's cluster, GPU and faults into the plain
// values topo, net and exec take (a topo.Description, a built topology, an
// hw.GPU, a net.FaultPlan of link and device ids). Every name and rank is
// resolved here, before a run, and what does not resolve is a
// *problem.Error at the path the user wrote: each function takes the path
// prefix of the spec it compiles ("" for a top-level spec, "training" for
// the training base of a fault sweep), so a misspelled device in a fault
// sweep's training base is "training.faults.links[0].src".
//
// Drivers call it from their Check (run by validation, so validate()
// rejects what run() would) and again at the start of a run; the models
// below it never see a spec.
package compile

import (
	"context"
	"fmt"
	"strings"

	"github.com/eidolon-sim/eidolon/core/exec"
	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/eidolon-sim/eidolon/core/problem"
	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/eidolon-sim/eidolon/core/topo"
)

// Description is a validated cluster spec as topo describes a cluster:
// link names resolved to their figures, with the spec's bandwidth and
// latency overrides applied to the single-tier link, and defaults such as
// nics_per_node (= gpus_per_node) filled.
func Description(c spec.Cluster) topo.Description {
	d := topo.Description{Preset: c.Preset, Kind: c.Topology, Nodes: c.Nodes, GPUs: c.GPUs, Dims: c.Dims,
		Link: c.Link.Resolve(), Radix: c.Radix, Oversubscription: c.Oversubscription,
		GPUsPerNode: c.GPUsPerNode, NICsPerNode: c.GPUsPerNode, GPUsPerPCIeSwitch: c.GPUsPerPCIeSwitch,
		Intra: c.Intra, Fabric: c.Fabric, IntraLink: c.IntraLink.Resolve(), NICLink: c.NICLink.Resolve(), HostLink: c.HostLink.Resolve(),
		Switches: c.Switches, Ranks: c.Ranks}
	if c.BandwidthBytesPerS > 0 {
		d.Link.BandwidthBytesPerS = c.BandwidthBytesPerS
	}
	if c.LatencyS != nil {
		d.Link.LatencyS = *c.LatencyS
	}
	if c.NICsPerNode != nil {
		d.NICsPerNode = *c.NICsPerNode
	}
	for _, e := range c.Edges {
		d.Edges = append(d.Edges, topo.Edge{A: e.A, B: e.B, BandwidthBytesPerS: e.BandwidthBytesPerS, LatencyS: e.LatencyS,
			Directed: e.Directed, Tech: e.Tech})
	}
	return d
}

// Topology builds the cluster of a validated spec at prefix, its ranks
// mapped (a rank on a missing GPU: a problem at prefix.cluster.ranks[i]).
func Topology(prefix string, c spec.Cluster) (*topo.Topology, error) {
	return TopologyContext(context.Background(), prefix, c)
}

// TopologyContext is Topology stopping with ctx's error when ctx is
// canceled while a large cluster is built (topo.BuildContext).
func TopologyContext(ctx context.Context, prefix string, c spec.Cluster) (*topo.Topology, error) {
	t, err := topo.BuildContext(ctx, Description(c))
	if err == nil && c.Topology == topo.KindEdges {
		err = edgesConnect(t)
	}
	return t, problem.Under(spec.Field(prefix, "cluster"), err)
}

// edgesConnect is a problem at "edges" when some GPU of an edge-list
// cluster cannot reach another over its edges. The other topologies are
// connected by construction; a hand-written edge list that leaves a GPU
// out (or carries it one way only) would otherwise validate and then stop
// the run with a partitioned network at its first collective. GPUs forward
// on an edge list, so reaching GPU 0 and being reached from it suffices.
func edgesConnect(t *topo.Topology) error {
	gpus := t.GPUs()
	for _, g := range gpus[1:] {
		for _, p := range [][2]int{{gpus[0], g}, {g, gpus[0]}} {
			if _, err := t.Route(p[0], p[1]); err != nil {
				var pr problem.Problems
				pr.Addf("edges", "no path from %s to %s: every GPU must reach every other (a directed edge carries one way only)",
					t.Devices[p[0]].Name, t.Devices[p[1]].Name)
				return pr.Err()
			}
		}
	}
	return nil
}

// Faults resolves a validated fault spec at prefix against topology t:
// device names to device ids, a link fault to the ids of the link between
// its ends (and of the reverse with both_directions, topo.Reverse: a
// split PCIe switch's other half). Every name that is
// not a device of t and every pair without a link is a problem at its path
// (prefix.faults.links[i].src, ...).
func Faults(prefix string, fs spec.Faults, t *topo.Topology) (net.FaultPlan, error) {
	path := spec.Field(prefix, "faults")
	var p problem.Problems
	names := deviceNames{t: t}
	dev := func(at, name string) int {
		d, ok := names.id(name)
		if !ok {
			p.Addf(at, "%s", names.unknown(name))
			return -1
		}
		return d
	}
	var plan net.FaultPlan
	for i, lf := range fs.Links {
		at := spec.Index(spec.Field(path, "links"), i)
		a, b := dev(spec.Field(at, "src"), lf.Src), dev(spec.Field(at, "dst"), lf.Dst)
		if a < 0 || b < 0 {
			continue
		}
		l, ok := t.LinkBetween(a, b)
		if !ok {
			p.Addf(at, "no link from %s to %s", t.Devices[a].Name, t.Devices[b].Name)
			continue
		}
		links := []int{l}
		if lf.BothDirections {
			r, ok := t.Reverse(l)
			if !ok {
				p.Addf(at, "no link from %s back to %s", t.Devices[b].Name, t.Devices[a].Name)
				continue
			}
			links = append(links, r)
		}
		for _, l := range links {
			plan.Links = append(plan.Links, net.LinkFault{Link: l, Health: lf.Health, AtS: lf.AtS, UntilS: lf.UntilS})
		}
	}
	for i, df := range fs.Devices {
		if d := dev(spec.Field(spec.Index(spec.Field(path, "devices"), i), "device"), df.Device); d >= 0 {
			plan.Devices = append(plan.Devices, net.DeviceFault{Device: d, AtS: df.AtS, UntilS: df.UntilS})
		}
	}
	for i, s := range fs.Stragglers {
		if d := dev(spec.Field(spec.Index(spec.Field(path, "stragglers"), i), "device"), s.Device); d >= 0 {
			plan.Stragglers = append(plan.Stragglers, net.Straggler{Device: d, Slowdown: s.Slowdown})
		}
	}
	if s := fs.Sample; s != nil {
		plan.Sample = &net.FaultSample{LinkFailureProbability: s.LinkFailureProbability, LinkDegradeProbability: s.LinkDegradeProbability,
			DegradedHealth: s.DegradedHealth, StragglerProbability: s.StragglerProbability, Slowdown: s.Slowdown}
	}
	return plan, p.Err()
}

// GPU resolves the spec's GPU (a preset, or one with figures changed) at
// prefix.gpu.
func GPU(prefix string, gpu spec.GPU) (hw.GPU, error) {
	var p problem.Problems
	g, ok := gpu.Validate(&p, spec.Field(prefix, "gpu"))
	if !ok {
		return g, p.Err()
	}
	return g, nil
}

// Machine compiles a validated spec's cluster, GPU and faults at prefix and
// builds the exec machine on them (a fresh topology each call).
func Machine(prefix string, c spec.Cluster, gpu spec.GPU, fs spec.Faults, seed uint64) (*exec.Machine, error) {
	return MachineContext(context.Background(), prefix, c, gpu, fs, seed)
}

// MachineContext is Machine stopping with ctx's error when ctx is canceled
// while a large cluster is built (524,288 GPUs: about 3 s).
func MachineContext(ctx context.Context, prefix string, c spec.Cluster, gpu spec.GPU, fs spec.Faults, seed uint64) (*exec.Machine, error) {
	if _, err := GPU(prefix, gpu); err != nil {
		return nil, err
	}
	t, err := TopologyContext(ctx, prefix, c)
	if err != nil {
		return nil, err
	}
	return MachineOn(prefix, t, gpu, fs, seed)
}

// MachineOn is Machine on a topology already compiled (a caller that
// simulates many runs on one cluster builds it once).
func MachineOn(prefix string, t *topo.Topology, gpu spec.GPU, fs spec.Faults, seed uint64) (*exec.Machine, error) {
	g, err := GPU(prefix, gpu)
	if err != nil {
		return nil, err
	}
	plan, err := Faults(prefix, fs, t)
	if err != nil {
		return nil, err
	}
	return exec.NewMachine(t, g, plan, seed)
}

// Fabric compiles a validated spec's cluster and faults at prefix and
// builds a fabric of the network model ("flow" or "unaware") on a new
// kernel, with its collective engine and fault schedule (net.Build).
func Fabric(prefix string, c spec.Cluster, fs spec.Faults, seed uint64, model string) (net.Fabric, *net.Comms, []net.FaultEvent, error) {
	t, err := Topology(prefix, c)
	if err != nil {
		return nil, nil, nil, err
	}
	plan, err := Faults(prefix, fs, t)
	if err != nil {
		return nil, nil, nil, err
	}
	return net.Build(sim.New(), t, plan, seed, model)
}

// maxNamePatterns bounds how many patterns of device names an unknown
// device's problem lists.
const maxNamePatterns = 8

// deviceNames resolves a fault spec's device names on t, which may name
// every GPU of a large cluster: the names' index is built on the first
// look-up, and how t's devices are named on the first name t lacks.
type deviceNames struct {
	t        *topo.Topology
	ids      map[string]int
	patterns []topo.NamePattern
}

func (x *deviceNames) id(name string) (int, bool) {
	if x.ids == nil {
		x.ids = make(map[string]int, len(x.t.Devices))
		for i, d := range x.t.Devices {
			x.ids[d.Name] = i
		}
	}
	d, ok := x.ids[name]
	return d, ok
}

// unknown is the problem with a device name t does not have: the name t
// most likely has instead (the nearest pattern of t's names with the
// given name's numbers, so "node5.gpu3" is "n5.gpu3"; matching the
// patterns, not every name, keeps it quick on a million devices) and how
// t's devices are named.
func (x *deviceNames) unknown(name string) string {
	if x.patterns == nil {
		x.patterns = x.t.NamePatterns()
	}
	patterns := x.patterns
	keys := make([]string, len(patterns))
	for i, np := range patterns {
		keys[i] = np.Pattern
	}
	var like []string
	pattern, numbers := topo.SplitNumbers(name)
	for _, k := range problem.Suggest(pattern, keys) {
		if c := topo.FillNumbers(k, numbers); c != name {
			if _, ok := x.id(c); ok {
				like = append(like, c)
			}
		}
	}
	var ranges []string
	for i, np := range patterns {
		if i == maxNamePatterns {
			ranges = append(ranges, fmt.Sprintf("and %d more patterns", len(patterns)-i))
			break
		}
		if np.First == np.Last {
			ranges = append(ranges, fmt.Sprintf("%q", np.First))
		} else {
			ranges = append(ranges, fmt.Sprintf("%q … %q", np.First, np.Last))
		}
	}
	return fmt.Sprintf("no device named %q in cluster %q%s; its devices are %s",
		name, x.t.Name, problem.Meant(like), strings.Join(ranges, ", "))
}
