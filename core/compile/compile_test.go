package compile

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/eidolon-sim/eidolon/core/problem"
	"github.com/eidolon-sim/eidolon/core/spec"
)

func validCluster(t *testing.T, c spec.Cluster) spec.Cluster {
	c.Defaults()
	var p spec.Problems
	c.Validate(&p, "cluster")
	require.NoError(t, p.Err())
	return c
}

// Link names become their figures, with the overrides on the single-tier
// link; nics_per_node defaults to gpus_per_node.
func TestDescription(t *testing.T) {
	lat := 2e-6
	d := Description(validCluster(t, spec.Cluster{Topology: "ring", GPUs: 4, Link: spec.Link{Preset: "nvlink3"}, BandwidthBytesPerS: 1e11, LatencyS: &lat}))
	nv3, _ := hw.LinkByName("nvlink3")
	require.Equal(t, "ring", d.Kind)
	require.Equal(t, 1e11, d.Link.BandwidthBytesPerS)
	require.Equal(t, lat, d.Link.LatencyS)
	require.NotEqual(t, nv3.BandwidthBytesPerS, d.Link.BandwidthBytesPerS)
	require.Equal(t, nv3.Name, d.Link.Name)

	d = Description(validCluster(t, spec.Cluster{Topology: "composed", Nodes: 2, GPUsPerNode: 4}))
	require.Equal(t, 4, d.NICsPerNode)
	ndr, _ := hw.LinkByName("ib-ndr")
	require.Equal(t, ndr, d.NICLink)
}

// Names resolve to the ids of the built topology: a cable fault to both
// directions' links, devices and stragglers to device ids; every name that
// does not resolve is a problem at its path under the prefix.
func TestFaults(t *testing.T) {
	c := validCluster(t, spec.Cluster{Topology: "ring", GPUs: 4})
	tp, err := Topology("", c)
	require.NoError(t, err)
	fs := spec.Faults{
		Links:      []spec.LinkFault{{Src: "gpu0", Dst: "gpu1", Health: 0.5, AtS: 1, UntilS: 2, BothDirections: true}},
		Devices:    []spec.DeviceFault{{Device: "gpu2", AtS: 3}},
		Stragglers: []spec.Straggler{{Device: "gpu3", Slowdown: 1.5}},
		Sample:     &spec.FaultSample{LinkFailureProbability: 0.1},
	}
	fs.Defaults()
	plan, err := Faults("", fs, tp)
	require.NoError(t, err)
	fwd, _ := tp.LinkBetween(0, 1)
	rev, _ := tp.LinkBetween(1, 0)
	require.Equal(t, []net.LinkFault{{Link: fwd, Health: 0.5, AtS: 1, UntilS: 2}, {Link: rev, Health: 0.5, AtS: 1, UntilS: 2}}, plan.Links)
	require.Equal(t, []net.DeviceFault{{Device: 2, AtS: 3}}, plan.Devices)
	require.Equal(t, []net.Straggler{{Device: 3, Slowdown: 1.5}}, plan.Stragglers)
	require.Equal(t, &net.FaultSample{LinkFailureProbability: 0.1, DegradedHealth: 0.5, Slowdown: 1.5}, plan.Sample)

	bad := spec.Faults{Links: []spec.LinkFault{{Src: "gpu0", Dst: "gpu2", Health: 0}, {Src: "gpu9", Dst: "gpu1"}},
		Devices: []spec.DeviceFault{{Device: "nic0"}}}
	_, err = Faults("training", bad, tp)
	var se *spec.Error
	require.ErrorAs(t, err, &se)
	var paths []string
	for _, p := range se.Problems {
		paths = append(paths, p.Path)
	}
	require.Equal(t, []string{"training.faults.links[0]", "training.faults.links[1].src", "training.faults.devices[0].device"}, paths)
	require.ErrorContains(t, err, "no link from gpu0 to gpu2")
	require.ErrorContains(t, err, `training.faults.links[1].src: no device named "gpu9" in cluster "ring(4)"; its devices are "gpu0" … "gpu3"`)

	// A misspelt name gets the device of the nearest pattern with its
	// numbers, and the patterns of the cluster's names.
	dgx, err := Topology("", validCluster(t, spec.Cluster{Preset: "dgx-h100", Nodes: 4}))
	require.NoError(t, err)
	_, err = Faults("", spec.Faults{Stragglers: []spec.Straggler{{Device: "node3.gpu5"}, {Device: "gpu2"}, {Device: "n1.nvswitch0"}}}, dgx)
	require.ErrorContains(t, err, `faults.stragglers[0].device: no device named "node3.gpu5" in cluster "dgx-h100 x4" (did you mean "n3.gpu5"?); `+
		`its devices are "n0.gpu0" … "n3.gpu7", "n0.nvswitch" … "n3.nvswitch"`)
	require.ErrorContains(t, err, `"gpu2" in cluster "dgx-h100 x4" (did you mean "n0.gpu2"?)`)
	require.ErrorContains(t, err, `"n1.nvswitch0" in cluster "dgx-h100 x4" (did you mean "n1.nvswitch"?)`)

	_, err = Topology("inference", validCluster(t, spec.Cluster{Topology: "ring", GPUs: 4, Ranks: []int{3, 2, 1, 7}}))
	require.ErrorContains(t, err, "inference.cluster.ranks[3]: GPU index must be < 4")
	_, err = GPU("training", spec.GPU{Preset: "h10"})
	require.ErrorContains(t, err, `training.gpu: must be one of`)
}

// A plan applied to a fabric: a link fault lasts from at_s to until_s and
// the plan's ids outside the topology are an error.
func TestMachineAppliesThePlan(t *testing.T) {
	c := validCluster(t, spec.Cluster{Topology: "ring", GPUs: 4})
	m, err := Machine("", c, spec.GPU{Preset: "a100-80gb-sxm"}, spec.Faults{Links: []spec.LinkFault{{Src: "gpu0", Dst: "gpu1", Health: 0.25}}}, 1)
	require.NoError(t, err)
	l, _ := m.Fabric.Topology().LinkBetween(0, 1)
	require.Equal(t, 0.25, m.Fabric.Topology().Links[l].Health, "a time-0 fault is in force before the run")
	tp, err := Topology("", c)
	require.NoError(t, err)
	_, err = net.ApplyFaults(net.NewFlowNet(m.Fabric.Kernel(), tp), net.FaultPlan{Devices: []net.DeviceFault{{Device: 99}}}, 1)
	require.ErrorContains(t, err, "fault on device 99")
}

// An edge-list cluster in which some GPU cannot reach another is a problem
// at cluster.edges, naming the pair; a directed ring, which carries every
// pair one way round, is connected.
func TestEdgesMustConnectEveryGPU(t *testing.T) {
	edge := func(a, b int, directed bool) spec.EdgeSpec {
		return spec.EdgeSpec{A: a, B: b, BandwidthBytesPerS: 1e9, Directed: directed}
	}
	for _, c := range []struct {
		name  string
		gpus  int
		edges []spec.EdgeSpec
		bad   string
	}{
		{"no edges", 2, nil, "no path from gpu0 to gpu1"},
		{"a GPU left out", 3, []spec.EdgeSpec{edge(0, 1, false)}, "no path from gpu0 to gpu2"},
		{"one way only", 2, []spec.EdgeSpec{edge(0, 1, true)}, "no path from gpu1 to gpu0"},
		{"directed ring", 3, []spec.EdgeSpec{edge(0, 1, true), edge(1, 2, true), edge(2, 0, true)}, ""},
		{"through a switch", 3, []spec.EdgeSpec{edge(0, 3, false), edge(1, 3, false), edge(2, 3, false)}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := spec.Cluster{Topology: "edges", GPUs: c.gpus, Edges: c.edges}
			if c.name == "through a switch" {
				cl.Switches = 1
			}
			_, err := Topology("training", validCluster(t, cl))
			if c.bad == "" {
				require.NoError(t, err)
				return
			}
			var pe *problem.Error
			require.ErrorAs(t, err, &pe)
			require.Equal(t, "training.cluster.edges", pe.Problems[0].Path)
			require.Contains(t, pe.Problems[0].Message, c.bad)
		})
	}
}
