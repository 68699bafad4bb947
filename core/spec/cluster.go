package spec

import (
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/eidolon-sim/eidolon/core/topo"
)

// Cluster describes the machine: a DGX preset scaled to N nodes, a single-tier
// topology of GPUs, a composed (intra-node × fabric) cluster, or an edge
// list. Compiled by compile.Description into a topo.Description.
type Cluster struct {
	// Preset: "dgx-a100", "dgx-h100", "dgx-h200", "dgx-h800", "dgx-b200",
	// "dgx-b300" (NVSwitch inside the node, eight NICs per node into a
	// rail-optimized fabric), "gb200-nvl72", "gb300-nvl72" (72 GPUs in one
	// NVLink domain per rack, a NIC per GPU; their GPUs are the "gb200" and
	// "gb300" presets) or
	// "aws-p4d" (8 A100s on NVSwitch, 4 EFA NICs of 100 Gb/s, two GPUs per
	// NIC behind a PCIe Gen4 switch). When set, Topology must be empty,
	// Nodes scales it and IntraLink, NICLink and HostLink, where given,
	// replace its links; no other field applies (see clusterFields).
	Preset string `json:"preset,omitempty"`
	// Topology when there is no preset: "ring", "fully_connected",
	// "switch", "torus", "mesh", "leaf_spine", "composed", "edges".
	Topology string `json:"topology,omitempty"`
	// Nodes for presets and "composed"; default 1.
	Nodes int `json:"nodes,omitempty"`
	// GPUs for ring, fully_connected, switch, leaf_spine, edges.
	GPUs int `json:"gpus,omitempty"`
	// Dims of a torus or mesh, 1 to 3 entries each >= 2, e.g. [4, 4].
	Dims []int `json:"dims,omitempty"`
	// Link (a preset of eidolon.presets.links(), or one with figures
	// changed: see Link; so are IntraLink, NICLink and HostLink) of
	// single-tier topologies and of the fabric of "leaf_spine"; default
	// "nvlink4".
	Link Link `json:"link,omitzero"`
	// BandwidthBytesPerS and LatencyS override the link preset's figures:
	// bandwidth at least 1e6 B/s (MinBandwidthBytesPerS), latency in
	// [0, 1e6] s (MaxDurationS); the same bounds hold for edges.
	BandwidthBytesPerS float64  `json:"bandwidth_bytes_per_s,omitempty"`
	LatencyS           *float64 `json:"latency_s,omitempty"`
	// Radix (ports per switch, default 64) and Oversubscription (leaf
	// down:up ports, default 1) of leaf_spine and composed fabrics.
	Radix            int     `json:"radix,omitempty"`
	Oversubscription float64 `json:"oversubscription,omitempty"`
	// Composed clusters: GPUsPerNode (default 8), Intra ("nvswitch",
	// "ring", "fully_connected", "none"; default "nvswitch") over IntraLink
	// (default "nvlink4"); NICsPerNode (default GPUsPerNode) at NICLink
	// (default "ib-ndr") over HostLink, the PCIe generation of GPUs and NICs
	// ("pcie3-x16", "pcie4-x16", "pcie5-x16"; default "pcie5-x16"); Fabric
	// "rail_optimized" (default; one rail per NIC of a node) or
	// "leaf_spine".
	// GPUsPerPCIeSwitch puts the GPUs behind PCIe switches, that many per
	// switch, with the NICs spread evenly over the switches and each GPU
	// reaching the fabric through a NIC on its own switch (so GPUs sharing a
	// NIC share its bandwidth). Default: gpus_per_node / nics_per_node when
	// there are fewer NICs than GPUs (e.g. 4 NICs for 8 GPUs: 2 GPUs and one
	// NIC per switch), otherwise 0: NIC i attached to GPU i directly. It
	// must divide gpus_per_node, and nics_per_node must be a multiple of the
	// switch count gpus_per_node / gpus_per_pcie_switch.
	GPUsPerNode       int    `json:"gpus_per_node,omitempty"`
	Intra             string `json:"intra,omitempty"`
	IntraLink         Link   `json:"intra_link,omitzero"`
	NICsPerNode       *int   `json:"nics_per_node,omitempty"`
	NICLink           Link   `json:"nic_link,omitzero"`
	HostLink          Link   `json:"host_link,omitzero"`
	GPUsPerPCIeSwitch int    `json:"gpus_per_pcie_switch,omitempty"`
	Fabric            string `json:"fabric,omitempty"`
	// Edges and Switches of an "edges" topology: devices 0..gpus-1 are GPUs,
	// gpus..gpus+switches-1 switches.
	Switches int        `json:"switches,omitempty"`
	Edges    []EdgeSpec `json:"edges,omitempty"`
	// Ranks maps rank i to the GPU with index Ranks[i] (GPUs numbered in
	// device order: node-major). Default: rank i is GPU i.
	Ranks []int `json:"ranks,omitempty"`
}

// EdgeSpec is one connection of an edge-list topology.
type EdgeSpec struct {
	A                  int     `json:"a"`
	B                  int     `json:"b"`
	BandwidthBytesPerS float64 `json:"bandwidth_bytes_per_s"`
	LatencyS           float64 `json:"latency_s"`
	// Directed adds only a -> b.
	Directed bool `json:"directed,omitempty"`
	// Tech names the link technology (a link preset such as "nvlink3" or
	// "pcie4-x16"), which the collective library's model reads; default
	// "custom".
	Tech string `json:"tech,omitempty"`
}

// ClusterPresets are the preset names: package topo's, which builds them.
func ClusterPresets() []string { return topo.Presets() }

// ClusterTopologies are the topology kinds without a preset: package
// topo's, which builds them.
func ClusterTopologies() []string { return topo.Kinds() }

// Defaults fills the optional fields of the cluster's kind (a field of
// another kind stays empty: Validate reports it as not applying).
func (c *Cluster) Defaults() {
	if c.Nodes == 0 {
		c.Nodes = 1
	}
	if c.Link.absent() && c.uses("link") {
		c.Link = Link{Preset: "nvlink4"}
	}
	if c.Radix == 0 && c.uses("radix") {
		c.Radix = 64
	}
	if c.Oversubscription == 0 && c.uses("oversubscription") {
		c.Oversubscription = 1
	}
	if c.Topology == "composed" {
		if c.GPUsPerNode == 0 {
			c.GPUsPerNode = 8
		}
		if c.Intra == "" {
			c.Intra = "nvswitch"
		}
		if c.IntraLink.absent() {
			c.IntraLink = Link{Preset: "nvlink4"}
		}
		if c.NICsPerNode == nil {
			n := c.GPUsPerNode
			c.NICsPerNode = &n
		}
		if c.NICLink.absent() {
			c.NICLink = Link{Preset: "ib-ndr"}
		}
		if c.HostLink.absent() {
			c.HostLink = Link{Preset: "pcie5-x16"}
		}
		if c.Fabric == "" {
			c.Fabric = "rail_optimized"
		}
		if n := *c.NICsPerNode; c.GPUsPerPCIeSwitch == 0 && n > 0 && n < c.GPUsPerNode && c.GPUsPerNode%n == 0 {
			c.GPUsPerPCIeSwitch = c.GPUsPerNode / n
		}
	}
}

// Validate reports every problem under path.
func (c *Cluster) Validate(p *Problems, path string) {
	f := func(name string) string { return Field(path, name) }
	switch {
	case c.Preset != "" && c.Topology != "":
		p.Addf(f("topology"), "must be empty when preset is set (got preset %q, topology %q)", c.Preset, c.Topology)
	case c.Preset != "":
		p.OneOf(f("preset"), c.Preset, ClusterPresets())
	case c.Topology == "":
		p.Addf(path, "needs a preset (one of %v) or a topology (one of %v)", ClusterPresets(), ClusterTopologies())
	default:
		p.OneOf(f("topology"), c.Topology, ClusterTopologies())
	}
	p.IntInRange(f("nodes"), c.Nodes, 1, 1<<16)
	checkLink := func(name string, l Link) {
		if !l.absent() {
			l.Validate(p, f(name))
		}
	}
	c.validateApplies(p, path)
	checkLink("link", c.Link)
	if c.BandwidthBytesPerS != 0 {
		p.Bandwidth(f("bandwidth_bytes_per_s"), c.BandwidthBytesPerS)
	}
	if c.LatencyS != nil {
		p.Duration(f("latency_s"), *c.LatencyS)
	}
	if c.uses("radix") {
		p.IntInRange(f("radix"), c.Radix, 2, 1<<16)
		p.InRange(f("oversubscription"), c.Oversubscription, 1e-3, 1e3)
	}
	switch c.Topology {
	case "ring", "fully_connected", "leaf_spine":
		p.IntInRange(f("gpus"), c.GPUs, 2, 1<<20)
	case "switch", "edges":
		p.IntInRange(f("gpus"), c.GPUs, 1, 1<<20)
	case "torus", "mesh":
		if len(c.Dims) < 1 || len(c.Dims) > 3 {
			p.Addf(f("dims"), "must have 1 to 3 entries, got %d", len(c.Dims))
		}
		for i, d := range c.Dims {
			p.IntInRange(Index(f("dims"), i), d, 2, 1<<12)
		}
	case "":
		// A preset node with other links (a what-if): the links it
		// names replace the preset's.
		checkLink("intra_link", c.IntraLink)
		checkLink("nic_link", c.NICLink)
		checkLink("host_link", c.HostLink)
	case "composed":
		p.IntInRange(f("gpus_per_node"), c.GPUsPerNode, 1, 1024)
		p.OneOf(f("intra"), c.Intra, topo.Intras())
		p.OneOf(f("fabric"), c.Fabric, topo.Fabrics())
		checkLink("intra_link", c.IntraLink)
		checkLink("nic_link", c.NICLink)
		checkLink("host_link", c.HostLink)
		if c.NICsPerNode != nil {
			p.IntInRange(f("nics_per_node"), *c.NICsPerNode, 0, 1024)
			c.validateNICs(p, path)
		}
	}
	if c.Topology == "edges" {
		p.IntInRange(f("switches"), c.Switches, 0, 1<<20)
		n := c.GPUs + c.Switches
		for i, e := range c.Edges {
			ep := Index(f("edges"), i)
			p.IntInRange(Field(ep, "a"), e.A, 0, n-1)
			p.IntInRange(Field(ep, "b"), e.B, 0, n-1)
			if e.A == e.B {
				p.Addf(ep, "a and b must differ, both are %d", e.A)
			}
			p.Bandwidth(Field(ep, "bandwidth_bytes_per_s"), e.BandwidthBytesPerS)
			p.Duration(Field(ep, "latency_s"), e.LatencyS)
		}
	}
	seen := map[int]int{}
	for i, g := range c.Ranks {
		if g < 0 {
			p.Addf(Index(f("ranks"), i), "must be a GPU index >= 0, got %d", g)
		}
		if j, ok := seen[g]; ok {
			p.Addf(Index(f("ranks"), i), "GPU %d is already rank %d", g, j)
		}
		seen[g] = i
	}
}

// clusterFields says which kinds of cluster each field shapes ("preset":
// a cluster preset; the rest are topologies). A field given to a cluster of
// another kind would be ignored, so Validate reports it.
var clusterFields = []struct {
	name  string
	kinds []string
}{
	{"gpus", []string{"ring", "fully_connected", "switch", "leaf_spine", "edges"}},
	{"dims", []string{"torus", "mesh"}},
	{"link", singleTier},
	{"bandwidth_bytes_per_s", singleTier},
	{"latency_s", singleTier},
	{"radix", []string{"leaf_spine", "composed"}},
	{"oversubscription", []string{"leaf_spine", "composed"}},
	{"gpus_per_node", []string{"composed"}},
	{"intra", []string{"composed"}},
	{"intra_link", []string{"composed", "preset"}},
	{"nics_per_node", []string{"composed"}},
	{"nic_link", []string{"composed", "preset"}},
	{"host_link", []string{"composed", "preset"}},
	{"gpus_per_pcie_switch", []string{"composed"}},
	{"fabric", []string{"composed"}},
	{"switches", []string{"edges"}},
	{"edges", []string{"edges"}},
}

// singleTier are the topologies built over one link (leaf_spine's fabric
// included).
var singleTier = []string{"ring", "fully_connected", "switch", "torus", "mesh", "leaf_spine"}

// kind is the cluster's kind as clusterFields names it.
func (c *Cluster) kind() string {
	if c.Preset != "" {
		return "preset"
	}
	return c.Topology
}

// uses reports whether the field shapes this kind of cluster.
func (c *Cluster) uses(field string) bool {
	for _, f := range clusterFields {
		if f.name == field {
			return slices.Contains(f.kinds, c.kind())
		}
	}
	return false
}

// given reports whether the spec set the field (by its JSON name): a
// value other than its zero.
func (c *Cluster) given(name string) bool {
	f, ok := clusterJSONFields[name]
	return ok && !reflect.ValueOf(c).Elem().FieldByIndex(f.index).IsZero()
}

// clusterJSONFields are Cluster's fields by JSON name.
var clusterJSONFields = structFields(reflect.TypeFor[Cluster]())

// validateApplies reports each field given to a cluster it does not shape,
// and more than one node for a topology without nodes.
func (c *Cluster) validateApplies(p *Problems, path string) {
	k := c.kind()
	if k == "" || (k != "preset" && !slices.Contains(ClusterTopologies(), k)) {
		return // reported: no kind, or an unknown one
	}
	what, hint := "topology "+strconv.Quote(k), ""
	if k == "preset" {
		what, hint = "a preset", `; a preset node takes other links (intra_link, nic_link, host_link), anything else is a "composed" topology`
	}
	for _, f := range clusterFields {
		if c.given(f.name) && !slices.Contains(f.kinds, k) {
			p.Addf(Field(path, f.name), "does not apply to %s, only to %s%s", what, strings.Join(f.kinds, ", "), hint)
		}
	}
	if c.Nodes > 1 && k != "preset" && k != "composed" {
		p.Addf(Field(path, "nodes"), "does not apply to topology %q (set gpus), got %d", k, c.Nodes)
	}
}

// validateNICs checks how a composed node's NICs and PCIe switches fit its
// GPUs (see GPUsPerPCIeSwitch).
func (c *Cluster) validateNICs(p *Problems, path string) {
	f := func(name string) string { return Field(path, name) }
	g, n, k := c.GPUsPerNode, *c.NICsPerNode, c.GPUsPerPCIeSwitch
	if g < 1 || n < 0 {
		return // reported above
	}
	if n == 0 && c.Nodes > 1 {
		p.Addf(f("nics_per_node"), "must be >= 1 when nodes > 1 (nodes reach each other only through NICs), got 0")
	}
	switch {
	case k < 0:
		p.Addf(f("gpus_per_pcie_switch"), "must be >= 0, got %d", k)
	case k == 0 && n > 0 && n < g && c.Nodes > 1:
		// Defaults shares NICs when they divide the GPUs; this is the rest.
		p.Addf(f("nics_per_node"), "%d NICs for %d GPUs per node: with fewer NICs than GPUs the NICs must divide the GPUs "+
			"(each shared by gpus_per_node / nics_per_node GPUs behind a PCIe switch), or set gpus_per_pcie_switch", n, g)
	case k > 0 && g%k != 0:
		p.Addf(f("gpus_per_pcie_switch"), "must divide gpus_per_node (%d), got %d", g, k)
	case k > 0 && n%(g/k) != 0:
		p.Addf(f("nics_per_node"), "must be a multiple of the %d PCIe switches per node (gpus_per_node %d / gpus_per_pcie_switch %d) "+
			"so that every switch has its NICs, got %d", g/k, g, k, n)
	}
}
