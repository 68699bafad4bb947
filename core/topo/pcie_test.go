package topo

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/hw"
)

func link(t *testing.T, name string) hw.Link {
	l, ok := hw.LinkByName(name)
	require.True(t, ok, name)
	return l
}

// composed is a composed cluster as a spec's defaults describe it
// (compile.Description): `nodes` nodes of 8 GPUs (nvlink3; NVSwitch unless
// intra says otherwise) with `nics` HDR NICs each on PCIe Gen4, rail
// optimized, and with fewer NICs than GPUs the GPUs 8/nics to a PCIe switch.
func composed(t *testing.T, nodes, nics int, intra string) Description {
	if intra == "" {
		intra = IntraNVSwitch
	}
	d := Description{Kind: KindComposed, Nodes: nodes, GPUsPerNode: 8, NICsPerNode: nics, Intra: intra,
		Fabric: RailOptimized, Radix: 64, Oversubscription: 1,
		IntraLink: link(t, "nvlink3"), NICLink: link(t, "ib-hdr"), HostLink: link(t, "pcie4-x16")}
	if nics < 8 {
		d.GPUsPerPCIeSwitch = 8 / nics
	}
	return d
}

// pathNames lists the devices a route visits after its source.
func pathNames(tp *Topology, p []int32) []string {
	var out []string
	for _, l := range p {
		out = append(out, tp.Devices[tp.Links[l].Dst].Name)
	}
	return out
}

func TestSharedNICsReachEveryGPU(t *testing.T) {
	tp, err := Build(composed(t, 2, 4, ""))
	require.NoError(t, err)
	require.Equal(t, 16, tp.NumRanks())
	require.Equal(t, 4, tp.NICsOnNode(0))
	require.Equal(t, 4, tp.NICsOnNode(1))
	// Every GPU reaches every GPU of the other node, both ways.
	var pairs [][2]int
	for a := 0; a < 8; a++ {
		for b := 8; b < 16; b++ {
			pairs = append(pairs, [2]int{tp.RankDevice(a), tp.RankDevice(b)}, [2]int{tp.RankDevice(b), tp.RankDevice(a)})
		}
	}
	require.NoError(t, tp.CheckReachable(pairs))
	// GPU i uses NIC i/2, the one on its own PCIe switch, and NIC j is on
	// rail j: n0.gpu3 -> n1.gpu6 leaves on rail 1 and enters on rail 3,
	// crossing a spine; no route passes through a GPU or the CPU.
	a, _ := tp.DeviceByName("n0.gpu3")
	b, _ := tp.DeviceByName("n1.gpu6")
	p, err := tp.Route(a, b)
	require.NoError(t, err)
	names := pathNames(tp, p)
	require.Len(t, names, 8)
	require.Equal(t, []string{"n0.pcie1.up", "n0.nic1", "rail1.leaf0"}, names[:3])
	require.Equal(t, []string{"rail3.leaf0", "n1.nic3", "n1.pcie3.down", "n1.gpu6"}, names[4:])
	require.Contains(t, names[3], "spine")
	for _, pr := range pairs {
		p, _ := tp.Route(pr[0], pr[1])
		for _, l := range p[:len(p)-1] {
			k := tp.Devices[tp.Links[l].Dst].Kind
			require.True(t, k == NIC || k == Switch, "transit through %s", tp.Devices[tp.Links[l].Dst].Name)
		}
	}
	// Inside the node GPUs use NVLink, never the PCIe switch they share.
	g0, _ := tp.DeviceByName("n0.gpu0")
	g1, _ := tp.DeviceByName("n0.gpu1")
	p, err = tp.Route(g0, g1)
	require.NoError(t, err)
	require.Equal(t, []string{"n0.nvswitch", "n0.gpu1"}, pathNames(tp, p))
	// Rail-optimized with fewer NICs: rails = NICs per node, four leaves.
	for r := 0; r < 4; r++ {
		_, ok := tp.DeviceByName(fmt.Sprintf("rail%d.leaf0", r))
		require.True(t, ok, "rail %d", r)
	}
	_, ok := tp.DeviceByName("rail4.leaf0")
	require.False(t, ok)
	// PCIe ports are the host link's: Gen4 x16, 31.5 GB/s per direction.
	up, _ := tp.DeviceByName("n0.pcie0.up")
	l, ok := tp.LinkBetween(g1, up)
	require.True(t, ok)
	require.InDelta(t, 31.51e9, tp.Links[l].BandwidthBytesPerS, 0.01e9)
	require.Equal(t, "pcie4-x16", tp.Links[l].Tech)
}

func TestSharedNICsWithoutNVLink(t *testing.T) {
	// Intra "none": one device per PCIe switch, GPUs on it talk through it
	// (PCIe peer-to-peer), GPUs on other switches through the fabric.
	tp, err := Build(composed(t, 2, 4, "none"))
	require.NoError(t, err)
	g0, _ := tp.DeviceByName("n0.gpu0")
	g1, _ := tp.DeviceByName("n0.gpu1")
	g2, _ := tp.DeviceByName("n0.gpu2")
	p, err := tp.Route(g0, g1)
	require.NoError(t, err)
	require.Equal(t, []string{"n0.pcie0", "n0.gpu1"}, pathNames(tp, p))
	p, err = tp.Route(g0, g2)
	require.NoError(t, err)
	// gpu0 -> pcie0 -> nic0 -> rail0 leaf -> spine -> rail1 leaf -> nic1 -> pcie1 -> gpu2.
	require.Len(t, p, 8)
	require.NotContains(t, pathNames(tp, p), "n0.cpu", "the root complex is not a transit hop")
}

func TestNICsPerSwitchPlacement(t *testing.T) {
	// 8 GPUs, 4 per switch (2 switches), 4 NICs: 2 NICs per switch; NIC j
	// on switch j/2, so GPUs 0..3 reach the fabric through NICs 0 and 1.
	cfg := ClusterConfig{Name: "x", Nodes: 2, GPUsPerNode: 8, Intra: IntraNVSwitch, IntraLink: link(t, "nvlink3"),
		NICsPerNode: 4, NICLink: link(t, "ib-hdr"), HostLink: link(t, "pcie5-x16"), GPUsPerPCIeSwitch: 4,
		Fabric: RailOptimized, Radix: 64, Oversubscription: 1}
	tp, err := Cluster(cfg)
	require.NoError(t, err)
	for _, c := range []struct{ nic, sw string }{{"n0.nic0", "n0.pcie0.up"}, {"n0.nic1", "n0.pcie0.up"}, {"n0.nic2", "n0.pcie1.up"}, {"n1.nic3", "n1.pcie1.up"}} {
		nic, _ := tp.DeviceByName(c.nic)
		sw, _ := tp.DeviceByName(c.sw)
		_, ok := tp.LinkBetween(sw, nic)
		require.True(t, ok, "%s on %s", c.nic, c.sw)
	}
	// n0.gpu3 -> n1.gpu1: both on switch 0 of their node, which has NICs
	// 0 and 1, so the route stays on one rail (ECMP picks which): six hops,
	// no spine, leaving and entering by the same NIC index.
	a, _ := tp.DeviceByName("n0.gpu3")
	b, _ := tp.DeviceByName("n1.gpu1")
	p, err := tp.Route(a, b)
	require.NoError(t, err)
	names := pathNames(tp, p)
	require.Len(t, names, 6)
	require.Contains(t, []string{"n0.nic0", "n0.nic1"}, names[1])
	require.Equal(t, "n1"+names[1][2:], names[3])
	require.Equal(t, []string{"n1.pcie0.down", "n1.gpu1"}, names[4:])

	bad := cfg
	bad.GPUsPerPCIeSwitch = 3
	_, err = Cluster(bad)
	require.ErrorContains(t, err, "must divide gpus per node")
	bad.GPUsPerPCIeSwitch, bad.NICsPerNode = 2, 2 // 4 switches, 2 NICs
	_, err = Cluster(bad)
	require.ErrorContains(t, err, "multiple of the 4 PCIe switches")
	bad.GPUsPerPCIeSwitch = 0 // the old attachment: NIC i on GPU i
	_, err = Cluster(bad)
	require.ErrorContains(t, err, "GPUs 2..7 of each node without a NIC")
}

func TestP4dPreset(t *testing.T) {
	tp, err := Preset("aws-p4d", 2)
	require.NoError(t, err)
	require.Equal(t, 16, tp.NumRanks())
	require.Equal(t, 4, tp.NICsOnNode(1))
	// One EFA card, 100 Gb/s = 12.5 GB/s per direction, per two A100s.
	nic, _ := tp.DeviceByName("n1.nic2")
	leaf, _ := tp.DeviceByName("rail2.leaf0")
	l, ok := tp.LinkBetween(nic, leaf)
	require.True(t, ok)
	require.Equal(t, 12.5e9, tp.Links[l].BandwidthBytesPerS)
	// NVLink 3 on NVSwitch: 300 GB/s per direction per GPU.
	g5, _ := tp.DeviceByName("n0.gpu5")
	sw, _ := tp.DeviceByName("n0.nvswitch")
	l, ok = tp.LinkBetween(g5, sw)
	require.True(t, ok)
	require.Equal(t, 300e9, tp.Links[l].BandwidthBytesPerS)
	// gpu5 is on PCIe switch 2 with gpu4 and EFA card 2.
	dst, _ := tp.DeviceByName("n1.gpu4")
	p, err := tp.Route(g5, dst)
	require.NoError(t, err)
	require.Equal(t, []string{"n0.pcie2.up", "n0.nic2", "rail2.leaf0", "n1.nic2", "n1.pcie2.down", "n1.gpu4"}, pathNames(tp, p))
	rows := PresetRows()
	require.Equal(t, "aws-p4d", rows[len(rows)-1].Name)
	require.Equal(t, 2, rows[len(rows)-1].GPUsPerPCIeSwitch)
	require.Equal(t, "pcie4-x16", rows[len(rows)-1].HostLink)
}

func TestDGXPresetsKeepDirectNICs(t *testing.T) {
	// The dgx presets attach NIC i to GPU i: no PCIe switch, no CPU device.
	for _, name := range []string{"dgx-a100", "dgx-h100", "dgx-h200"} {
		tp, err := Preset(name, 2)
		require.NoError(t, err)
		for _, d := range tp.Devices {
			require.NotEqual(t, CPU, d.Kind, name)
		}
		g, _ := tp.DeviceByName("n1.gpu6")
		nic, _ := tp.DeviceByName("n1.nic6")
		_, ok := tp.LinkBetween(g, nic)
		require.True(t, ok, name)
	}
}

func TestEveryPresetBuilds(t *testing.T) {
	for _, name := range Presets() {
		_, err := Preset(name, 3)
		require.NoError(t, err, name)
	}
}

func TestSharedNICsEveryIntraNetwork(t *testing.T) {
	// Whatever the intra-node network, every GPU reaches every other GPU,
	// and with an NVLink network (GPUs on one PCIe switch are ring
	// neighbours here) GPU-to-GPU routes inside a node stay off PCIe.
	for _, intra := range []string{"nvswitch", "ring", "fully_connected", "none"} {
		tp, err := Build(composed(t, 3, 4, intra))
		require.NoError(t, err, intra)
		var pairs [][2]int
		for a := 0; a < tp.NumRanks(); a++ {
			for b := 0; b < tp.NumRanks(); b++ {
				if a != b {
					pairs = append(pairs, [2]int{tp.RankDevice(a), tp.RankDevice(b)})
				}
			}
		}
		require.NoError(t, tp.CheckReachable(pairs), intra)
		if intra == "none" {
			continue
		}
		for a := 0; a < 8; a++ {
			for b := 0; b < 8; b++ {
				p, _ := tp.Route(tp.RankDevice(a), tp.RankDevice(b))
				for _, l := range p {
					require.NotEqual(t, "pcie4-x16", tp.Links[l].Tech, "%s: gpu%d -> gpu%d over PCIe", intra, a, b)
				}
			}
		}
	}
}

func TestMoreNICsThanGPUs(t *testing.T) {
	// 4 GPUs, 8 NICs, 2 GPUs per switch: 2 switches with 4 NICs each; every
	// NIC is on a rail (8 rails) and every GPU reaches the other node.
	tp, err := Cluster(ClusterConfig{Name: "x", Nodes: 2, GPUsPerNode: 4, Intra: IntraNVSwitch, IntraLink: link(t, "nvlink4"),
		NICsPerNode: 8, NICLink: link(t, "ib-ndr"), HostLink: link(t, "pcie5-x16"), GPUsPerPCIeSwitch: 2,
		Fabric: RailOptimized, Radix: 64, Oversubscription: 1})
	require.NoError(t, err)
	require.Equal(t, 8, tp.NICsOnNode(0))
	nic7, _ := tp.DeviceByName("n0.nic7")
	sw1, _ := tp.DeviceByName("n0.pcie1.up")
	_, ok := tp.LinkBetween(sw1, nic7)
	require.True(t, ok, "NIC 7 on switch 7/4 = 1")
	var pairs [][2]int
	for a := 0; a < 4; a++ {
		for b := 4; b < 8; b++ {
			pairs = append(pairs, [2]int{tp.RankDevice(a), tp.RankDevice(b)}, [2]int{tp.RankDevice(b), tp.RankDevice(a)})
		}
	}
	require.NoError(t, tp.CheckReachable(pairs))
}

// A cable to a split PCIe switch is a link to one half and one from the
// other: Reverse pairs them (both_directions, the fault sweep's cables),
// and CableEnds names both directions alike.
func TestCablesThroughASplitPCIeSwitch(t *testing.T) {
	tp, err := Preset("aws-p4d", 2)
	require.NoError(t, err)
	dev := func(name string) int {
		d, ok := tp.DeviceByName(name)
		require.True(t, ok, name)
		return d
	}
	between := func(a, b string) int {
		l, ok := tp.LinkBetween(dev(a), dev(b))
		require.True(t, ok, a+"->"+b)
		return l
	}
	up, down := dev("n0.pcie1.up"), dev("n0.pcie1.down")
	require.Equal(t, down, tp.Twin(up))
	require.Equal(t, up, tp.Twin(down))
	require.Equal(t, dev("n0.gpu2"), tp.Twin(dev("n0.gpu2")))
	for _, c := range [][2]int{
		{between("n0.gpu2", "n0.pcie1.up"), between("n0.pcie1.down", "n0.gpu2")},
		{between("n0.nic1", "n0.pcie1.down"), between("n0.pcie1.up", "n0.nic1")},
		{between("n0.gpu2", "n0.nvswitch"), between("n0.nvswitch", "n0.gpu2")},
	} {
		r, ok := tp.Reverse(c[0])
		require.True(t, ok)
		require.Equal(t, c[1], r, tp.LinkName(c[0]))
		a, b := tp.CableEnds(c[0])
		ra, rb := tp.CableEnds(c[1])
		require.Equal(t, [2]int{a, b}, [2]int{rb, ra})
	}
	// Every link of the preset has its reverse, and the reverse's is it.
	for l := range tp.Links {
		r, ok := tp.Reverse(l)
		require.True(t, ok, tp.LinkName(l))
		back, _ := tp.Reverse(r)
		require.Equal(t, l, back, tp.LinkName(l))
	}
}
