package topo

import (
	"context"
	"fmt"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/spec"
)

// FromSpec builds the topology a validated cluster spec describes, with its
// rank mapping.
func FromSpec(c spec.Cluster) (*Topology, error) {
	return FromSpecContext(context.Background(), c)
}

// FromSpecContext is FromSpec stopping with ctx's error when ctx is
// canceled while a composed or preset cluster is built.
func FromSpecContext(ctx context.Context, c spec.Cluster) (*Topology, error) {
	t, err := build(c, ctx.Err)
	if err != nil {
		return nil, err
	}
	if len(c.Ranks) > 0 {
		gpus := t.GPUs()
		devs := make([]int, len(c.Ranks))
		var p spec.Problems
		for i, g := range c.Ranks {
			if g >= len(gpus) {
				p.Addf(spec.Index("cluster.ranks", i), "GPU index must be < %d (the cluster has %d GPUs), got %d", len(gpus), len(gpus), g)
				continue
			}
			devs[i] = gpus[g]
		}
		if err := p.Err(); err != nil {
			return nil, err
		}
		if err := t.SetRanks(devs); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func build(c spec.Cluster, canceled func() error) (*Topology, error) {
	if c.Preset != "" {
		return presetPolled(c.Preset, c.Nodes, canceled)
	}
	link := func(name string) hw.Link {
		l, _ := hw.LinkByName(name)
		return l
	}
	l := link(c.Link)
	if c.BandwidthBytesPerS > 0 {
		l.BandwidthBytesPerS = c.BandwidthBytesPerS
	}
	if c.LatencyS != nil {
		l.LatencyS = *c.LatencyS
	}
	switch c.Topology {
	case "ring":
		return Ring(c.GPUs, l)
	case "fully_connected":
		return FullyConnected(c.GPUs, l)
	case "switch":
		return SingleSwitch(c.GPUs, l)
	case "torus":
		return Torus(c.Dims, l)
	case "mesh":
		return Mesh(c.Dims, l)
	case "leaf_spine":
		return LeafSpineHosts(c.GPUs, c.Radix, c.Oversubscription, l)
	case "composed":
		nics := c.GPUsPerNode
		if c.NICsPerNode != nil {
			nics = *c.NICsPerNode
		}
		return Cluster(ClusterConfig{
			Name:  fmt.Sprintf("composed(%d x %d gpus, %s, %s)", c.Nodes, c.GPUsPerNode, c.Intra, c.Fabric),
			Nodes: c.Nodes, GPUsPerNode: c.GPUsPerNode, Intra: c.Intra, IntraLink: link(c.IntraLink),
			NICsPerNode: nics, NICLink: link(c.NICLink), HostLink: link(c.HostLink),
			GPUsPerPCIeSwitch: c.GPUsPerPCIeSwitch, Fabric: c.Fabric, Radix: c.Radix, Oversubscription: c.Oversubscription,
			Canceled: canceled,
		})
	case "edges":
		edges := make([]Edge, len(c.Edges))
		for i, e := range c.Edges {
			edges[i] = Edge{A: e.A, B: e.B, BandwidthBytesPerS: e.BandwidthBytesPerS, LatencyS: e.LatencyS, Directed: e.Directed, Tech: e.Tech}
		}
		return EdgeList(c.GPUs, c.Switches, edges)
	}
	return nil, fmt.Errorf("unknown topology %q", c.Topology)
}
