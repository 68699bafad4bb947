package topo

import (
	"context"
	"fmt"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/problem"
)

// Kinds of topology a Description builds without a preset.
const (
	KindRing           = "ring"
	KindFullyConnected = "fully_connected"
	KindSwitch         = "switch"
	KindTorus          = "torus"
	KindMesh           = "mesh"
	KindLeafSpine      = "leaf_spine"
	KindComposed       = "composed"
	KindEdges          = "edges"
)

// Kinds lists the topology kinds a Description builds without a preset (the
// spec's vocabulary for cluster.topology).
func Kinds() []string {
	return []string{KindRing, KindFullyConnected, KindSwitch, KindTorus, KindMesh, KindLeafSpine, KindComposed, KindEdges}
}

// Intras lists the intra-node arrangements of a composed cluster.
func Intras() []string { return []string{IntraNVSwitch, IntraRing, IntraFullyConnected, IntraNone} }

// Fabrics lists the fabric arrangements of a composed cluster.
func Fabrics() []string { return []string{RailOptimized, LeafSpine} }

// Description is a cluster to build, in plain values: a preset scaled to
// Nodes, or a topology Kind with its sizes and links, and the rank mapping.
// Package compile makes one from a validated spec (link names resolved, the
// link overrides applied); Build builds it.
type Description struct {
	// Preset names a preset (Presets); Kind is then ignored.
	Preset string
	// Kind of topology without a preset (Kinds).
	Kind string
	// Nodes of a preset or composed cluster; GPUs of ring, fully_connected,
	// switch, leaf_spine and edges; Dims of a torus or mesh.
	Nodes, GPUs int
	Dims        []int
	// Link of single-tier topologies and of a leaf_spine fabric.
	Link hw.Link
	// Radix and Oversubscription of leaf_spine and composed fabrics.
	Radix            int
	Oversubscription float64
	// A composed cluster (see ClusterConfig): NICsPerNode NICs at NICLink,
	// GPUs and NICs on HostLink. A preset takes IntraLink, NICLink and
	// HostLink where they are set (Name not empty) in place of its own.
	GPUsPerNode, NICsPerNode, GPUsPerPCIeSwitch int
	Intra, Fabric                               string
	IntraLink, NICLink, HostLink                hw.Link
	// Switches and Edges of an edge-list topology.
	Switches int
	Edges    []Edge
	// Ranks maps rank i to the GPU with index Ranks[i] (GPUs in device
	// order); empty: rank i is GPU i.
	Ranks []int
}

// Build builds the topology d describes, with its rank mapping. A rank on
// a GPU the cluster does not have is a *problem.Error at "ranks[i]".
func Build(d Description) (*Topology, error) { return BuildContext(context.Background(), d) }

// BuildContext is Build stopping with ctx's error when ctx is canceled
// while a composed or preset cluster is built (131,072 GPUs take about a
// second; see ClusterConfig.Canceled).
func BuildContext(ctx context.Context, d Description) (*Topology, error) {
	t, err := d.build(ctx.Err)
	if err != nil {
		return nil, err
	}
	if len(d.Ranks) > 0 {
		gpus := t.GPUs()
		devs := make([]int, len(d.Ranks))
		var p problem.Problems
		for i, g := range d.Ranks {
			if g >= len(gpus) {
				p.Addf(problem.Index("ranks", i), "GPU index must be < %d (the cluster has %d GPUs), got %d", len(gpus), len(gpus), g)
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

func (d Description) build(canceled func() error) (*Topology, error) {
	if d.Preset != "" {
		c, err := PresetConfig(d.Preset, d.Nodes)
		if err != nil {
			return nil, err
		}
		// A preset node with other links (a what-if): each link given
		// replaces the preset's.
		for _, o := range []struct {
			role string
			from hw.Link
			to   *hw.Link
		}{{"intra", d.IntraLink, &c.IntraLink}, {"nic", d.NICLink, &c.NICLink}, {"host", d.HostLink, &c.HostLink}} {
			if o.from.Name != "" && o.from != *o.to {
				*o.to = o.from
				label := o.from.Name
				if l, _ := hw.LinkByName(label); l != o.from {
					label += "*" // the preset's figures changed
				}
				c.Name += fmt.Sprintf(", %s %s", o.role, label)
			}
		}
		c.Canceled = canceled
		return Cluster(c)
	}
	switch d.Kind {
	case KindRing:
		return Ring(d.GPUs, d.Link)
	case KindFullyConnected:
		return FullyConnected(d.GPUs, d.Link)
	case KindSwitch:
		return SingleSwitch(d.GPUs, d.Link)
	case KindTorus:
		return Torus(d.Dims, d.Link)
	case KindMesh:
		return Mesh(d.Dims, d.Link)
	case KindLeafSpine:
		return LeafSpineHosts(d.GPUs, d.Radix, d.Oversubscription, d.Link)
	case KindComposed:
		return Cluster(ClusterConfig{
			Name:  fmt.Sprintf("composed(%d x %d gpus, %s, %s)", d.Nodes, d.GPUsPerNode, d.Intra, d.Fabric),
			Nodes: d.Nodes, GPUsPerNode: d.GPUsPerNode, Intra: d.Intra, IntraLink: d.IntraLink,
			NICsPerNode: d.NICsPerNode, NICLink: d.NICLink, HostLink: d.HostLink,
			GPUsPerPCIeSwitch: d.GPUsPerPCIeSwitch, Fabric: d.Fabric, Radix: d.Radix, Oversubscription: d.Oversubscription,
			Canceled: canceled,
		})
	case KindEdges:
		return EdgeList(d.GPUs, d.Switches, d.Edges)
	}
	return nil, fmt.Errorf("unknown topology %q", d.Kind)
}
