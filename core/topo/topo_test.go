package topo

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/hw"
)

var l10 = hw.Link{Name: "x", BandwidthBytesPerS: 10e9, LatencyS: 1e-6}

func TestBuilderShapes(t *testing.T) {
	cases := []struct {
		name          string
		build         func() (*Topology, error)
		gpus, links   int
		switchesLeast int
	}{
		// n GPUs in a ring: n cables, 2n directed links (2 GPUs: one cable).
		{"ring8", func() (*Topology, error) { return Ring(8, l10) }, 8, 16, 0},
		{"ring2", func() (*Topology, error) { return Ring(2, l10) }, 2, 2, 0},
		// n(n−1)/2 cables.
		{"full5", func() (*Topology, error) { return FullyConnected(5, l10) }, 5, 20, 0},
		{"switch6", func() (*Topology, error) { return SingleSwitch(6, l10) }, 6, 12, 1},
		// 4×4 torus: 2 cables per node = 32 cables; mesh: 2·4·3 = 24 cables.
		{"torus4x4", func() (*Topology, error) { return Torus([]int{4, 4}, l10) }, 16, 64, 0},
		{"mesh4x4", func() (*Topology, error) { return Mesh([]int{4, 4}, l10) }, 16, 48, 0},
		// 3D torus 3×3×3: 3 cables per node.
		{"torus3d", func() (*Topology, error) { return Torus([]int{3, 3, 3}, l10) }, 27, 162, 0},
	}
	for _, c := range cases {
		tp, err := c.build()
		require.NoError(t, err, c.name)
		require.Len(t, tp.GPUs(), c.gpus, c.name)
		require.Len(t, tp.Links, c.links, c.name)
		require.Equal(t, c.gpus, tp.NumRanks(), c.name)
	}
}

func TestDGXPreset(t *testing.T) {
	tp, err := Preset("dgx-h100", 4)
	require.NoError(t, err)
	require.Equal(t, 32, tp.NumRanks())
	nics, nvsw := 0, 0
	for _, d := range tp.Devices {
		switch {
		case d.Kind == NIC:
			nics++
		case d.Kind == Switch && d.Node >= 0:
			nvsw++
		}
	}
	require.Equal(t, 32, nics)
	require.Equal(t, 4, nvsw)
	// NVLink 4: 900 GB/s both directions = 450 GB/s per direction per GPU;
	// NDR: 400 Gb/s = 50 GB/s per direction per NIC.
	up, ok := tp.LinkBetween(0, 32) // n0.gpu0 -> n0.nvswitch (device 32 is the first node switch)
	require.True(t, ok)
	require.Equal(t, 450e9, tp.Links[up].BandwidthBytesPerS)
	nic, _ := tp.DeviceByName("n1.nic3")
	leaf, _ := tp.DeviceByName("rail3.leaf0")
	l, ok := tp.LinkBetween(nic, leaf)
	require.True(t, ok)
	require.Equal(t, 50e9, tp.Links[l].BandwidthBytesPerS)
	_, err = Preset("dgx-z100", 1)
	require.ErrorContains(t, err, "dgx-h100")
}

// A Blackwell Ultra GPU reaches its ConnectX-8 over PCIe Gen6 x16 (GB300
// NVL72 and DGX B300), so the 800 Gb/s NIC, not the PCIe hop, bounds its
// traffic off the node; a GB200's ConnectX-7 (400 Gb/s) sits behind Gen5.
func TestBlackwellUltraReachesItsNICOverGen6(t *testing.T) {
	for preset, want := range map[string][2]string{
		"gb300-nvl72": {"pcie6-x16", "ib-xdr"}, "dgx-b300": {"pcie6-x16", "ib-xdr"}, "gb200-nvl72": {"pcie5-x16", "ib-ndr"},
	} {
		tp, err := Preset(preset, 2)
		require.NoError(t, err)
		gpu, _ := tp.DeviceByName("n0.gpu0")
		nic, _ := tp.DeviceByName("n0.nic0")
		l, ok := tp.LinkBetween(gpu, nic)
		require.True(t, ok, preset)
		pcie, _ := hw.LinkByName(want[0])
		net, _ := hw.LinkByName(want[1])
		assert.Equal(t, pcie.BandwidthBytesPerS, tp.Links[l].BandwidthBytesPerS, preset)
		assert.Greater(t, pcie.BandwidthBytesPerS*pcie.CollectiveEfficiency, net.BandwidthBytesPerS*0.9*net.CollectiveEfficiency, preset)
	}
}

// A preset node with another NIC (a what-if): its NIC links carry the new
// link's figures, everything else stays the preset's.
func TestPresetWithOtherLinks(t *testing.T) {
	xdr, _ := hw.LinkByName("ib-xdr")
	tp, err := Build(Description{Preset: "dgx-h100", Nodes: 2, NICLink: xdr})
	require.NoError(t, err)
	require.Equal(t, "dgx-h100 x2, nic ib-xdr", tp.Name)
	nic, _ := tp.DeviceByName("n1.nic3")
	leaf, _ := tp.DeviceByName("rail3.leaf0")
	l, ok := tp.LinkBetween(nic, leaf)
	require.True(t, ok)
	require.Equal(t, 100e9, tp.Links[l].BandwidthBytesPerS)
	up, _ := tp.LinkBetween(0, 16) // n0.gpu0 -> n0.nvswitch: NVLink 4 still
	require.Equal(t, 450e9, tp.Links[up].BandwidthBytesPerS)
	// The preset's own link given again changes nothing, the name included.
	ndr, _ := hw.LinkByName("ib-ndr")
	same, err := Build(Description{Preset: "dgx-h100", Nodes: 2, NICLink: ndr})
	require.NoError(t, err)
	require.Equal(t, "dgx-h100 x2", same.Name)
}

func TestRoutesAreShortestAndDeterministic(t *testing.T) {
	tp, _ := Preset("dgx-h100", 8)
	a, _ := tp.DeviceByName("n0.gpu7")
	b, _ := tp.DeviceByName("n5.gpu2")
	p1, err := tp.Route(a, b)
	require.NoError(t, err)
	// gpu -> nic -> rail7 leaf -> spine -> rail2 leaf -> nic -> gpu.
	require.Len(t, p1, 6)
	require.Equal(t, a, tp.Links[p1[0]].Src)
	require.Equal(t, b, tp.Links[p1[len(p1)-1]].Dst)
	for i := 1; i < len(p1); i++ {
		require.Equal(t, tp.Links[p1[i-1]].Dst, tp.Links[p1[i]].Src)
	}
	tp2, _ := Preset("dgx-h100", 8)
	p2, _ := tp2.Route(a, b)
	require.Equal(t, p1, p2, "same topology, same ECMP choice")
	// Same node: through the NVSwitch only.
	c, _ := tp.DeviceByName("n0.gpu3")
	p3, _ := tp.Route(a, c)
	require.Len(t, p3, 2)
}

func TestECMPSpreadsOverSpines(t *testing.T) {
	tp, _ := Preset("dgx-h100", 8)
	used := map[int]bool{}
	for n := 1; n < 8; n++ {
		for g := 0; g < 8; g++ {
			a, _ := tp.DeviceByName("n0.gpu0")
			b, _ := tp.DeviceByName(tp.Devices[tp.RankDevice(n*8+g)].Name)
			if g == 0 {
				continue // same rail: leaf only
			}
			p, err := tp.Route(a, b)
			require.NoError(t, err)
			used[tp.Links[p[2]].Dst] = true // the spine
		}
	}
	require.Greater(t, len(used), 10, "49 cross-rail routes should use many of the 32 spines")
}

func TestDimensionOrderOnTorus(t *testing.T) {
	tp, _ := Torus([]int{4, 4}, l10)
	// (0,0) -> (2,3): dimension 0 first (2 hops, tie goes up), then
	// dimension 1 the short way round (3 -> one hop down via wrap).
	p, err := tp.Route(0, index([]int{2, 3}, []int{4, 4}))
	require.NoError(t, err)
	var visited []int
	for _, l := range p {
		visited = append(visited, tp.Links[l].Dst)
	}
	require.Equal(t, []int{4, 8, 11}, visited)
}

func TestRerouteAroundFailureAndPartition(t *testing.T) {
	tp, _ := Ring(6, l10)
	p, _ := tp.Route(0, 2)
	require.Len(t, p, 2)
	l01, _ := tp.LinkBetween(0, 1)
	tp.SetHealth(l01, 0)
	p, err := tp.Route(0, 2)
	require.NoError(t, err)
	require.Len(t, p, 4, "the long way round")
	l54, _ := tp.LinkBetween(0, 5)
	tp.SetHealth(l54, 0)
	_, err = tp.Route(0, 2)
	var ue *UnreachableError
	require.ErrorAs(t, err, &ue)
	require.Contains(t, err.Error(), "gpu0 -> gpu2")
	require.Equal(t, []string{"gpu0->gpu1", "gpu0->gpu5"}, ue.Failed, "the cut links at the pair's ends")
	require.Contains(t, err.Error(), "failed at their ends: gpu0->gpu1, gpu0->gpu5")
	err = tp.CheckReachable([][2]int{{0, 1}, {0, 3}, {1, 2}})
	require.ErrorAs(t, err, &ue)
	require.Equal(t, 2, ue.Total)
	require.Equal(t, []string{"gpu0->gpu1", "gpu0->gpu5"}, ue.Failed)
	// Recovery restores the short route.
	tp.SetHealth(l01, 1)
	p, err = tp.Route(0, 2)
	require.NoError(t, err)
	require.Len(t, p, 2)
	// A failed switch partitions a star.
	st, _ := SingleSwitch(3, l10)
	st.SetDeviceDown(3, true)
	_, err = st.Route(0, 1)
	require.ErrorAs(t, err, &ue)
	require.Len(t, ue.Failed, 2, "gpu0's uplink and gpu1's downlink, through the failed switch")
}

func TestLeafSpineOversubscription(t *testing.T) {
	// radix 8, 3:1 -> 6 down, 2 up per leaf; 24 hosts -> 4 leaves, 2 spines.
	tp, err := LeafSpineHosts(24, 8, 3, l10)
	require.NoError(t, err)
	leaves, spines := 0, 0
	for _, d := range tp.Devices {
		if d.Kind == Switch && len(d.Name) > 4 && d.Name[:4] == "leaf" {
			leaves++
		}
		if d.Kind == Switch && len(d.Name) > 5 && d.Name[:5] == "spine" {
			spines++
		}
	}
	require.Equal(t, 4, leaves)
	require.Equal(t, 2, spines)
}

func TestSetRanksRejectsBadMappings(t *testing.T) {
	tp, _ := SingleSwitch(4, l10)
	require.ErrorContains(t, tp.SetRanks([]int{0, 0}), "both map")
	require.ErrorContains(t, tp.SetRanks([]int{4}), "not a gpu")
	require.NoError(t, tp.SetRanks([]int{3, 2, 1, 0}))
	require.Equal(t, 3, tp.RankDevice(0))
}

func TestEdgeList(t *testing.T) {
	tp, err := EdgeList(3, 1, []Edge{{A: 0, B: 3, BandwidthBytesPerS: 1}, {A: 1, B: 3, BandwidthBytesPerS: 1}, {A: 2, B: 3, BandwidthBytesPerS: 1, Directed: true}})
	require.NoError(t, err)
	require.Len(t, tp.Links, 5)
	_, err = tp.Route(2, 0) // 2 -> switch -> 0
	require.NoError(t, err)
	_, err = tp.Route(0, 2)
	require.Error(t, err, "the only link at gpu2 is outgoing")
	_, err = EdgeList(2, 0, []Edge{{A: 0, B: 5}})
	require.ErrorContains(t, err, "edge 0")
}

func TestNamePatternsAndNumbers(t *testing.T) {
	tp, err := Preset("dgx-h100", 3)
	require.NoError(t, err)
	ps := tp.NamePatterns()
	require.Equal(t, NamePattern{"n#.gpu#", "n0.gpu0", "n2.gpu7"}, ps[0])
	require.Equal(t, NamePattern{"n#.nvswitch", "n0.nvswitch", "n2.nvswitch"}, ps[1])
	pattern, numbers := SplitNumbers("n12.gpu3")
	require.Equal(t, "n#.gpu#", pattern)
	require.Equal(t, []string{"12", "3"}, numbers)
	require.Equal(t, "n12.gpu3", FillNumbers(pattern, numbers))
	require.Equal(t, "n0.gpu3", FillNumbers(pattern, []string{"3"}), "too few numbers fill the last #s")
	require.Equal(t, "n0.nvswitch", FillNumbers("n#.nvswitch", []string{"0", "0"}), "extra numbers are dropped")
}
