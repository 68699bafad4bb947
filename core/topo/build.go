package topo

import (
	"fmt"

	"github.com/eidolon-sim/eidolon/core/hw"
)

// Builders below return a topology with ranks mapped to GPUs in device order.
// A link preset's LatencyS is the one-way latency of a hop through one switch
// (see hw.LinkPresets), so the two links that meet at a switch get half of it
// each; direct GPU-to-GPU links get all of it.

func direct(name string, n int) *Topology {
	t := New(name)
	t.GPUsForward = true
	for i := 0; i < n; i++ {
		t.AddDevice(GPU, fmt.Sprintf("gpu%d", i), -1, i)
	}
	return t
}

func (t *Topology) rankGPUs() *Topology {
	_ = t.SetRanks(t.GPUs())
	return t
}

func needAtLeast(what string, n, lo int) error {
	if n < lo {
		return fmt.Errorf("%s needs at least %d, got %d", what, lo, n)
	}
	return nil
}

// Ring connects n GPUs in a bidirectional ring.
func Ring(n int, l hw.Link) (*Topology, error) {
	if err := needAtLeast("ring: gpus", n, 2); err != nil {
		return nil, err
	}
	t := direct(fmt.Sprintf("ring(%d)", n), n)
	for i := 0; i < n; i++ {
		j := (i + 1) % n
		if n == 2 && i == 1 {
			break // two GPUs: one cable, not two
		}
		t.Connect(i, j, l.BandwidthBytesPerS, l.LatencyS, l.Name)
	}
	return t.rankGPUs(), nil
}

// FullyConnected links every pair of n GPUs directly.
func FullyConnected(n int, l hw.Link) (*Topology, error) {
	if err := needAtLeast("fully connected: gpus", n, 2); err != nil {
		return nil, err
	}
	t := direct(fmt.Sprintf("fully_connected(%d)", n), n)
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			t.Connect(i, j, l.BandwidthBytesPerS, l.LatencyS, l.Name)
		}
	}
	return t.rankGPUs(), nil
}

// SingleSwitch attaches n GPUs to one switch, one port each.
func SingleSwitch(n int, l hw.Link) (*Topology, error) {
	if err := needAtLeast("switch: gpus", n, 1); err != nil {
		return nil, err
	}
	t := New(fmt.Sprintf("switch(%d)", n))
	for i := 0; i < n; i++ {
		t.AddDevice(GPU, fmt.Sprintf("gpu%d", i), 0, i)
	}
	s := t.AddDevice(Switch, "switch", 0, -1)
	for i := 0; i < n; i++ {
		t.Connect(i, s, l.BandwidthBytesPerS, l.LatencyS/2, l.Name)
	}
	return t.rankGPUs(), nil
}

// Torus builds a torus (wraparound in every dimension) of GPUs with the given
// dimensions, e.g. [4 4] or [4 4 4]; routing is dimension order.
func Torus(dims []int, l hw.Link) (*Topology, error) { return grid(dims, l, true) }

// Mesh is Torus without wraparound links.
func Mesh(dims []int, l hw.Link) (*Topology, error) { return grid(dims, l, false) }

func grid(dims []int, l hw.Link, wrap bool) (*Topology, error) {
	if len(dims) < 1 || len(dims) > 3 {
		return nil, fmt.Errorf("torus/mesh: need 1 to 3 dimensions, got %d", len(dims))
	}
	for i, d := range dims {
		if d < 2 {
			return nil, fmt.Errorf("torus/mesh: dimension %d must be >= 2, got %d", i, d)
		}
	}
	kind := "mesh"
	if wrap {
		kind = "torus"
	}
	n := gridSize(dims)
	t := direct(fmt.Sprintf("%s%v", kind, dims), n)
	t.torus = &torusInfo{dims: append([]int(nil), dims...), wrap: wrap}
	for i := 0; i < n; i++ {
		c := coords(i, dims)
		for d := range dims {
			if c[d]+1 == dims[d] && (!wrap || dims[d] == 2) {
				continue // no wrap link, or it would duplicate the only neighbour
			}
			c2 := append([]int(nil), c...)
			c2[d] = (c[d] + 1) % dims[d]
			t.Connect(i, index(c2, dims), l.BandwidthBytesPerS, l.LatencyS, l.Name)
		}
	}
	return t.rankGPUs(), nil
}

// Edge is one connection of an edge-list topology.
type Edge struct {
	A, B               int
	BandwidthBytesPerS float64
	LatencyS           float64
	// Directed adds only A -> B; otherwise both directions.
	Directed bool
	// Tech names the link technology; "" is "custom".
	Tech string
}

// EdgeList builds any topology: devices 0..gpus-1 are GPUs, the next
// `switches` are switches, connected by edges. GPUs forward traffic.
func EdgeList(gpus, switches int, edges []Edge) (*Topology, error) {
	if err := needAtLeast("edge list: gpus", gpus, 1); err != nil {
		return nil, err
	}
	t := direct(fmt.Sprintf("edges(%d gpus, %d switches, %d edges)", gpus, switches, len(edges)), gpus)
	for i := 0; i < switches; i++ {
		t.AddDevice(Switch, fmt.Sprintf("switch%d", i), -1, -1)
	}
	n := gpus + switches
	for i, e := range edges {
		if e.A < 0 || e.A >= n || e.B < 0 || e.B >= n || e.A == e.B {
			return nil, fmt.Errorf("edge %d: endpoints (%d, %d) must be distinct devices in [0, %d)", i, e.A, e.B, n)
		}
		tech := e.Tech
		if tech == "" {
			tech = "custom"
		}
		t.AddLink(e.A, e.B, e.BandwidthBytesPerS, e.LatencyS, tech)
		if !e.Directed {
			t.AddLink(e.B, e.A, e.BandwidthBytesPerS, e.LatencyS, tech)
		}
	}
	return t.rankGPUs(), nil
}

// Fabric arrangements for ClusterConfig.Fabric.
const (
	// RailOptimized: NIC i of every node connects to a leaf of rail i; leaves
	// connect to a spine layer.
	RailOptimized = "rail_optimized"
	// LeafSpine: NICs fill leaves in node order; leaves connect to spines.
	LeafSpine = "leaf_spine"
)

// Intra-node arrangements for ClusterConfig.Intra.
const (
	IntraNVSwitch       = "nvswitch"
	IntraRing           = "ring"
	IntraFullyConnected = "fully_connected"
	IntraNone           = "none"
)

// ClusterConfig is a multi-dimensional composition: an intra-node network
// (NVSwitch, ring or full mesh of GPUs) times a switched fabric of NICs
// across nodes.
type ClusterConfig struct {
	Name        string
	Nodes       int
	GPUsPerNode int
	Intra       string
	// IntraLink is each GPU's intra-node bandwidth per direction (for
	// NVSwitch: the GPU's aggregate NVLink bandwidth, one port to the switch).
	IntraLink hw.Link
	// NICsPerNode NICs. With GPUsPerPCIeSwitch 0, NIC i is attached to GPU
	// i mod GPUsPerNode over HostLink (a HostLink with zero bandwidth means
	// the GPU's own port is the NIC), so a fabric needs NICsPerNode >=
	// GPUsPerNode.
	NICsPerNode int
	NICLink     hw.Link
	// HostLink is the PCIe link (its generation and width) of GPUs and NICs.
	HostLink hw.Link
	// GPUsPerPCIeSwitch > 0 builds the node's PCIe tree: S = GPUsPerNode /
	// GPUsPerPCIeSwitch switches, GPU i on switch i / GPUsPerPCIeSwitch, NIC
	// j on switch j / (NICsPerNode / S), every switch also on the host's CPU
	// root complex, each port a HostLink. A GPU reaches the fabric through a
	// NIC on its own switch (GPUDirect RDMA, NCCL's PIX/PXB paths), so GPUs
	// sharing a NIC share its bandwidth. With an intra-node GPU network the
	// switch carries no GPU-to-GPU traffic (NCCL prefers NVLink): it is then
	// two devices, "nN.pcieS.up" (from the GPUs to the NICs and the CPU) and
	// "nN.pcieS.down" (to the GPUs), so no route turns back through it;
	// with Intra "none" it is one device "nN.pcieS" and GPUs on one switch
	// reach each other through it (PCIe peer-to-peer). NICsPerNode must be a
	// multiple of S.
	GPUsPerPCIeSwitch int
	Fabric            string
	// Radix is the leaf and spine switch port count; Oversubscription is a
	// leaf's down:up port ratio (1 = non-blocking).
	Radix            int
	Oversubscription float64
	// Canceled, if set, is polled while the topology is built (131,072
	// GPUs take about a second); its error stops the build.
	Canceled func() error
}

// canceled polls c.Canceled at every 64th node n.
func (c ClusterConfig) canceled(n int) error {
	if c.Canceled == nil || n%64 != 0 {
		return nil
	}
	return c.Canceled()
}

// Cluster builds the composed topology.
func Cluster(c ClusterConfig) (*Topology, error) {
	if c.Nodes < 1 || c.GPUsPerNode < 1 {
		return nil, fmt.Errorf("cluster: need nodes >= 1 and gpus_per_node >= 1, got %d and %d", c.Nodes, c.GPUsPerNode)
	}
	t := New(c.Name)
	gpu := func(n, i int) int { return n*c.GPUsPerNode + i }
	for n := 0; n < c.Nodes; n++ {
		if err := c.canceled(n); err != nil {
			return nil, err
		}
		for i := 0; i < c.GPUsPerNode; i++ {
			t.AddDevice(GPU, fmt.Sprintf("n%d.gpu%d", n, i), n, i)
		}
	}
	il := c.IntraLink
	for n := 0; n < c.Nodes; n++ {
		if err := c.canceled(n); err != nil {
			return nil, err
		}
		switch c.Intra {
		case IntraNVSwitch:
			s := t.AddDevice(Switch, fmt.Sprintf("n%d.nvswitch", n), n, -1)
			for i := 0; i < c.GPUsPerNode; i++ {
				t.Connect(gpu(n, i), s, il.BandwidthBytesPerS, il.LatencyS/2, il.Name)
			}
		case IntraRing:
			t.GPUsForward = true
			for i := 0; i < c.GPUsPerNode && c.GPUsPerNode > 1; i++ {
				if c.GPUsPerNode == 2 && i == 1 {
					break
				}
				t.Connect(gpu(n, i), gpu(n, (i+1)%c.GPUsPerNode), il.BandwidthBytesPerS, il.LatencyS, il.Name)
			}
		case IntraFullyConnected:
			for i := 0; i < c.GPUsPerNode; i++ {
				for j := i + 1; j < c.GPUsPerNode; j++ {
					t.Connect(gpu(n, i), gpu(n, j), il.BandwidthBytesPerS, il.LatencyS, il.Name)
				}
			}
		case IntraNone, "":
		default:
			return nil, fmt.Errorf("cluster: unknown intra-node network %q", c.Intra)
		}
	}
	var pcie []pcieSwitch // by node, then switch
	if c.GPUsPerPCIeSwitch > 0 {
		var err error
		if pcie, err = addPCIe(t, c, gpu); err != nil {
			return nil, err
		}
	} else if c.NICsPerNode > 0 && c.NICsPerNode < c.GPUsPerNode && c.Nodes > 1 {
		return nil, fmt.Errorf("cluster: %d NICs per node attached one per GPU leave GPUs %d..%d of each node without a NIC; "+
			"set GPUsPerPCIeSwitch to share NICs through PCIe switches", c.NICsPerNode, c.NICsPerNode, c.GPUsPerNode-1)
	}
	if c.NICsPerNode > 0 && c.Nodes > 1 {
		if err := addFabric(t, c, gpu, pcie); err != nil {
			return nil, err
		}
	}
	return t.rankGPUs(), nil
}

// pcieSwitch is one PCIe switch of a node: up carries traffic from its GPUs
// (and the CPU) to its NICs and the CPU, down carries traffic to its GPUs;
// one device (up == down) when GPUs may talk over PCIe.
type pcieSwitch struct{ up, down int }

// addPCIe builds every node's PCIe tree (see ClusterConfig.GPUsPerPCIeSwitch)
// except the NICs, which addFabric attaches; it returns the switches node by
// node.
func addPCIe(t *Topology, c ClusterConfig, gpu func(n, i int) int) ([]pcieSwitch, error) {
	k, g := c.GPUsPerPCIeSwitch, c.GPUsPerNode
	if g%k != 0 {
		return nil, fmt.Errorf("cluster: gpus per PCIe switch (%d) must divide gpus per node (%d)", k, g)
	}
	s := g / k
	if c.NICsPerNode%s != 0 {
		return nil, fmt.Errorf("cluster: nics per node (%d) must be a multiple of the %d PCIe switches per node (%d gpus / %d per switch)",
			c.NICsPerNode, s, g, k)
	}
	hl := c.HostLink
	if hl.BandwidthBytesPerS <= 0 {
		return nil, fmt.Errorf("cluster: PCIe switches need a host link with bandwidth > 0 (got %q at %v B/s)", hl.Name, hl.BandwidthBytesPerS)
	}
	split := c.Intra != IntraNone && c.Intra != ""
	out := make([]pcieSwitch, 0, c.Nodes*s)
	for n := 0; n < c.Nodes; n++ {
		if err := c.canceled(n); err != nil {
			return nil, err
		}
		cpu := t.AddDevice(CPU, fmt.Sprintf("n%d.cpu", n), n, -1)
		for j := 0; j < s; j++ {
			var sw pcieSwitch
			if split {
				sw.up = t.AddDevice(Switch, fmt.Sprintf("n%d.pcie%d.up", n, j), n, j)
				sw.down = t.AddDevice(Switch, fmt.Sprintf("n%d.pcie%d.down", n, j), n, j)
				t.SetTwins(sw.up, sw.down)
			} else {
				sw.up = t.AddDevice(Switch, fmt.Sprintf("n%d.pcie%d", n, j), n, j)
				sw.down = sw.up
			}
			for i := j * k; i < (j+1)*k; i++ {
				sw.attach(t, gpu(n, i), hl)
			}
			// The root port: the CPU both sends and receives on both halves
			// (to the GPUs through down, to the NICs through up); host
			// traffic is not simulated yet, so its port is not shared.
			sw.attach(t, cpu, hl)
			if split {
				sw.attachFrom(t, cpu, hl)
			}
			out = append(out, sw)
		}
	}
	return out, nil
}

// attach connects device d to the switch's port: d -> up and down -> d, each
// half of a switch hop's latency.
func (sw pcieSwitch) attach(t *Topology, d int, l hw.Link) {
	t.AddLink(d, sw.up, l.BandwidthBytesPerS, l.LatencyS/2, l.Name)
	t.AddLink(sw.down, d, l.BandwidthBytesPerS, l.LatencyS/2, l.Name)
}

// attachFrom connects a device the GPUs send to, a NIC (or the CPU's second
// pair of links): up -> d and d -> down, so traffic from the fabric reaches
// only the switch's own GPUs.
func (sw pcieSwitch) attachFrom(t *Topology, nic int, l hw.Link) {
	t.AddLink(sw.up, nic, l.BandwidthBytesPerS, l.LatencyS/2, l.Name)
	t.AddLink(nic, sw.down, l.BandwidthBytesPerS, l.LatencyS/2, l.Name)
}

func addFabric(t *Topology, c ClusterConfig, gpu func(n, i int) int, pcie []pcieSwitch) error {
	if c.Radix < 2 {
		return fmt.Errorf("cluster: switch radix must be >= 2, got %d", c.Radix)
	}
	o := c.Oversubscription
	if o <= 0 {
		o = 1
	}
	down := int(float64(c.Radix)*o/(1+o) + 0.5)
	down = max(1, min(c.Radix-1, down))
	up := c.Radix - down
	nl, hl := c.NICLink, c.HostLink
	// leafOf gives (group, index within group) of the leaf port for NIC i of node n.
	var groups, perGroup int
	leafOf := func(n, i int) (int, int) { return 0, 0 }
	switch c.Fabric {
	case RailOptimized:
		groups, perGroup = c.NICsPerNode, c.Nodes
		leafOf = func(n, i int) (int, int) { return i, n }
	case LeafSpine:
		groups, perGroup = 1, c.Nodes*c.NICsPerNode
		leafOf = func(n, i int) (int, int) { return 0, n*c.NICsPerNode + i }
	default:
		return fmt.Errorf("cluster: unknown fabric %q (want %q or %q)", c.Fabric, RailOptimized, LeafSpine)
	}
	leavesPerGroup := (perGroup + down - 1) / down
	leaves := make([][]int, groups)
	for g := range leaves {
		for j := 0; j < leavesPerGroup; j++ {
			name := fmt.Sprintf("leaf%d", j)
			if c.Fabric == RailOptimized {
				name = fmt.Sprintf("rail%d.leaf%d", g, j)
			}
			leaves[g] = append(leaves[g], t.AddDevice(Switch, name, -1, -1))
		}
	}
	perNode := len(pcie) / c.Nodes // PCIe switches per node, 0 without
	for n := 0; n < c.Nodes; n++ {
		if err := c.canceled(n); err != nil {
			return err
		}
		for i := 0; i < c.NICsPerNode; i++ {
			nic := gpu(n, i%c.GPUsPerNode)
			if perNode > 0 {
				nic = t.AddDevice(NIC, fmt.Sprintf("n%d.nic%d", n, i), n, i)
				pcie[n*perNode+i/(c.NICsPerNode/perNode)].attachFrom(t, nic, hl)
			} else if hl.BandwidthBytesPerS > 0 {
				nic = t.AddDevice(NIC, fmt.Sprintf("n%d.nic%d", n, i), n, i)
				t.Connect(gpu(n, i%c.GPUsPerNode), nic, hl.BandwidthBytesPerS, hl.LatencyS/2, hl.Name)
			}
			g, p := leafOf(n, i)
			t.Connect(nic, leaves[g][p/down], nl.BandwidthBytesPerS, nl.LatencyS/2, nl.Name)
		}
	}
	if groups*leavesPerGroup == 1 {
		return nil // one leaf: no spine needed
	}
	// Spine layer: each leaf has `up` uplinks, one to each of `up` spines.
	// A real fabric past one spine's radix adds a tier; we keep one tier with
	// wide spines, which preserves the leaf uplink bandwidth (the bottleneck).
	spines := make([]int, up)
	for s := range spines {
		spines[s] = t.AddDevice(Switch, fmt.Sprintf("spine%d", s), -1, -1)
	}
	for _, ls := range leaves {
		for j, l := range ls {
			if err := c.canceled(j); err != nil {
				return err
			}
			for _, s := range spines {
				t.Connect(l, s, nl.BandwidthBytesPerS, nl.LatencyS/2, nl.Name)
			}
		}
	}
	return nil
}

// LeafSpineHosts attaches `hosts` GPUs, one port each, to a two-tier
// leaf-spine (folded Clos) fabric of switches with the given radix and
// oversubscription (leaf down:up ports).
func LeafSpineHosts(hosts, radix int, oversubscription float64, l hw.Link) (*Topology, error) {
	if err := needAtLeast("leaf-spine: hosts", hosts, 2); err != nil {
		return nil, err
	}
	// Each host is a one-GPU node whose own port is its NIC.
	return Cluster(ClusterConfig{
		Name:  fmt.Sprintf("leaf_spine(%d hosts, radix %d, %.3g:1)", hosts, radix, oversubscription),
		Nodes: hosts, GPUsPerNode: 1, NICsPerNode: 1, NICLink: l,
		Fabric: LeafSpine, Radix: radix, Oversubscription: oversubscription,
	})
}

// Presets names the cluster presets, in a fixed order.
func Presets() []string {
	return []string{"dgx-a100", "dgx-h100", "dgx-h200", "dgx-h800", "dgx-b200", "dgx-b300", "gb200-nvl72", "gb300-nvl72", "aws-p4d"}
}

// PresetConfig returns the composition of a cluster preset scaled to
// `nodes`. The dgx-* presets: eight GPUs on NVSwitch inside the node at the GPU's aggregate NVLink rate,
// eight NICs (one per GPU, over PCIe) into a non-blocking rail-optimized
// fabric of 64-port switches (Quantum-2 QM9700 NDR has 64 ports; QM8700 HDR
// has 40). Sources: NVIDIA DGX A100 / DGX H100 / DGX H200 user guides: 8×
// ConnectX-6 HDR 200 Gb/s (A100) or 8× ConnectX-7 NDR 400 Gb/s (H100/H200)
// compute NICs; NVLink 600 / 900 GB/s per GPU, both directions.
func PresetConfig(name string, nodes int) (ClusterConfig, error) {
	look := func(n string) hw.Link {
		l, _ := hw.LinkByName(n)
		return l
	}
	c := ClusterConfig{Name: fmt.Sprintf("%s x%d", name, nodes), Nodes: nodes, GPUsPerNode: 8,
		Intra: IntraNVSwitch, NICsPerNode: 8, Fabric: RailOptimized, Oversubscription: 1}
	switch name {
	case "dgx-a100":
		c.IntraLink, c.NICLink, c.HostLink, c.Radix = look("nvlink3"), look("ib-hdr"), look("pcie4-x16"), 40
	case "dgx-h100", "dgx-h200":
		c.IntraLink, c.NICLink, c.HostLink, c.Radix = look("nvlink4"), look("ib-ndr"), look("pcie5-x16"), 64
	case "dgx-h800":
		// DeepSeek-AI 2024 (arXiv 2412.19437, §3.1): 8 H800s per node on
		// NVLink/NVSwitch (400 GB/s both directions), one 400 Gb/s
		// InfiniBand NIC per GPU ("IB ... 50 GB/s", §3.2.2).
		c.IntraLink, c.NICLink, c.HostLink, c.Radix = look("nvlink4-h800"), look("ib-ndr"), look("pcie5-x16"), 64
	case "dgx-b200":
		// NVIDIA DGX B200 datasheet (2024): 8 B200s on fifth-generation
		// NVLink through NVSwitch (1.8 TB/s per GPU, both directions;
		// 14.4 TB/s in all), 8 single-port ConnectX-7 (400 Gb/s) compute
		// NICs, PCIe Gen5.
		c.IntraLink, c.NICLink, c.HostLink, c.Radix = look("nvlink5"), look("ib-ndr"), look("pcie5-x16"), 64
	case "dgx-b300":
		// NVIDIA DGX B300 datasheet (2025): 8 B300s on fifth-generation
		// NVLink through NVSwitch (1.8 TB/s per GPU, both directions), 8
		// ConnectX-8 SuperNICs of 800 Gb/s, one per GPU, each reached
		// over the PCIe Gen6 its host interface and Blackwell Ultra have.
		c.IntraLink, c.NICLink, c.HostLink, c.Radix = look("nvlink5"), look("ib-xdr"), look("pcie6-x16"), 64
	case "gb300-nvl72":
		// NVIDIA GB300 NVL72 datasheet (2025): 72 Blackwell Ultra GPUs in
		// one NVLink domain (1.8 TB/s per GPU, 130 TB/s in all), a
		// ConnectX-8 SuperNIC of 800 Gb/s per GPU, on a PCIe Gen6 x16 link
		// to its GPU (NVIDIA at Hot Chips 2025; Gen5 x16, 48 GB/s, would
		// cap the 100 GB/s NIC at half). A "node" is the rack.
		c.GPUsPerNode, c.NICsPerNode = 72, 72
		c.IntraLink, c.NICLink, c.HostLink, c.Radix = look("nvlink5"), look("ib-xdr"), look("pcie6-x16"), 64
	case "gb200-nvl72":
		// NVIDIA GB200 NVL72 (datasheet, 2024): 72 Blackwell GPUs in one
		// NVLink domain through the NVLink Switch trays, 1.8 TB/s per GPU
		// both directions (130 TB/s in all), one ConnectX-7 400 Gb/s NIC
		// per GPU for the scale-out network. A "node" here is the rack.
		c.GPUsPerNode, c.NICsPerNode = 72, 72
		c.IntraLink, c.NICLink, c.HostLink, c.Radix = look("nvlink5"), look("ib-ndr"), look("pcie5-x16"), 64
	case "aws-p4d":
		// AWS p4d.24xlarge: 8× A100 40 GB on NVSwitch (600 GB/s NVLink per
		// GPU, both directions), "400 Gbps" of EFA with GPUDirect RDMA
		// (Amazon EC2 P4d instances page) over 4 network cards (EC2 User
		// Guide, "Network cards"): 4 NICs of 100 Gb/s for 8 GPUs, two GPUs
		// and one EFA card behind each of 4 PCIe Gen4 switches (the A100's
		// PCIe 4.0 x16 host interface; NVIDIA A100 datasheet). AWS publishes
		// neither the fabric's layout nor its switches; EFA's SRD transport
		// sprays each flow over many paths, so the fabric behaves as
		// non-blocking: modelled as the dgx presets' rail-optimized
		// non-blocking fabric (one rail per EFA card) of 64-port switches
		// (estimate).
		c.NICsPerNode, c.GPUsPerPCIeSwitch = 4, 2
		c.IntraLink, c.NICLink, c.HostLink, c.Radix = look("nvlink3"), look("efa-100g"), look("pcie4-x16"), 64
	default:
		return c, fmt.Errorf("unknown cluster preset %q (have %v)", name, Presets())
	}
	if c.IntraLink.BandwidthBytesPerS == 0 || c.NICLink.BandwidthBytesPerS == 0 {
		return c, fmt.Errorf("cluster preset %q: link presets missing from package hw", name)
	}
	return c, nil
}

// Preset builds a cluster preset of `nodes` nodes.
func Preset(name string, nodes int) (*Topology, error) {
	return Build(Description{Preset: name, Nodes: nodes})
}

// PresetRow describes a cluster preset (one node) for the catalogue.
type PresetRow struct {
	Name        string `arrow:"name"`
	GPUsPerNode int    `arrow:"gpus_per_node"`
	Intra       string `arrow:"intra"`
	IntraLink   string `arrow:"intra_link"`
	// IntraBandwidthBytesPerS per GPU per direction.
	IntraBandwidthBytesPerS float64 `arrow:"intra_bandwidth_bytes_per_s"`
	NICsPerNode             int     `arrow:"nics_per_node"`
	NICLink                 string  `arrow:"nic_link"`
	NICBandwidthBytesPerS   float64 `arrow:"nic_bandwidth_bytes_per_s"`
	// HostLink is the PCIe link of GPUs and NICs; GPUsPerPCIeSwitch 0 means
	// each NIC hangs off one GPU.
	HostLink          string `arrow:"host_link"`
	GPUsPerPCIeSwitch int    `arrow:"gpus_per_pcie_switch"`
	Fabric            string `arrow:"fabric"`
	Radix             int    `arrow:"radix"`
}

// PresetRows lists the cluster presets.
func PresetRows() []PresetRow {
	var rows []PresetRow
	for _, name := range Presets() {
		c, err := PresetConfig(name, 1)
		if err != nil {
			continue
		}
		rows = append(rows, PresetRow{Name: name, GPUsPerNode: c.GPUsPerNode, Intra: c.Intra,
			IntraLink: c.IntraLink.Name, IntraBandwidthBytesPerS: c.IntraLink.BandwidthBytesPerS,
			NICsPerNode: c.NICsPerNode, NICLink: c.NICLink.Name, NICBandwidthBytesPerS: c.NICLink.BandwidthBytesPerS,
			HostLink: c.HostLink.Name, GPUsPerPCIeSwitch: c.GPUsPerPCIeSwitch,
			Fabric: c.Fabric, Radix: c.Radix})
	}
	return rows
}
