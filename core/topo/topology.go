// Package topo describes the machine a simulation runs on: devices (GPUs,
// NICs, switches — NVSwitch, PCIe, fabric — and host CPUs), directed links between them with bandwidth, latency and
// health, the explicit mapping of ranks to GPU devices, and routing.
//
// Links are directed: a cable is two links, one per direction, each with the
// full per-direction bandwidth. Health in [0, 1] scales a link's bandwidth; 0
// means failed, and routing avoids it. A failed device removes every link
// touching it from routing.
//
// Routes are shortest paths by hop count; GPUs (unless GPUsForward) and CPUs
// are endpoints, never transit hops. Among equal-cost paths one is chosen
// by a deterministic hash of (source, destination) at every hop (ECMP); tori
// built by Torus use dimension-order routing while it is healthy. Routes are
// cached and recomputed after any health change. A destination that cannot
// be reached is an *UnreachableError naming the pairs.
package topo

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// Kind is what a device is.
type Kind uint8

const (
	GPU Kind = iota
	NIC
	Switch
	// CPU is a host's root complex: an endpoint like a GPU, never a transit
	// hop, so GPU-to-NIC traffic stays below its PCIe switch (GPUDirect RDMA)
	// and never crosses the host bridge between two switches.
	CPU
)

func (k Kind) String() string {
	switch k {
	case GPU:
		return "gpu"
	case NIC:
		return "nic"
	case Switch:
		return "switch"
	case CPU:
		return "cpu"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Device is one endpoint or switch.
type Device struct {
	Kind Kind
	// Name is unique, e.g. "n3.gpu5", "n3.nic5", "n3.nvswitch", "n3.pcie1",
	// "n3.cpu", "leaf2".
	Name string
	// Node is the host the device sits in, or -1 for fabric switches.
	Node int
	// Local is the index inside the node (GPU i, NIC i, PCIe switch i), or -1.
	Local int
}

// Link is one direction of a connection.
type Link struct {
	Src, Dst int
	// BandwidthBytesPerS is the healthy bandwidth in this direction.
	BandwidthBytesPerS float64
	// LatencyS is the one-way propagation and switching latency of this hop.
	LatencyS float64
	// Health in [0, 1] scales the bandwidth; 0 is failed.
	Health float64
	// Tech names the link technology, e.g. "nvlink4", "ib-ndr", "pcie5-x16".
	Tech string
}

// Topology is devices, links, the rank mapping and the routing state.
type Topology struct {
	Name    string
	Devices []Device
	Links   []Link
	// GPUsForward lets routes pass through GPUs (direct-connect topologies:
	// ring, torus, mesh, fully connected, edge lists). Otherwise GPUs are
	// endpoints only and traffic crosses NICs and switches.
	GPUsForward bool

	out, in [][]int32
	down    []bool // failed devices
	ranks   []int  // rank -> GPU device
	torus   *torusInfo
	pair    map[uint64]int32 // (src,dst) -> link id, for dimension-order routing
	routes  map[uint64][]int32
	version uint64
	capVer  uint64      // bumped on any health or device change
	nics    []int       // NICs per node, built on first use (nil after AddDevice)
	twin    map[int]int // a split device's other half (SetTwins)
	scratch bfsScratch
}

// New returns an empty topology.
func New(name string) *Topology {
	return &Topology{Name: name, routes: map[uint64][]int32{}, pair: map[uint64]int32{}}
}

// AddDevice adds a device and returns its id.
func (t *Topology) AddDevice(kind Kind, name string, node, local int) int {
	t.Devices = append(t.Devices, Device{Kind: kind, Name: name, Node: node, Local: local})
	t.out = append(t.out, nil)
	t.in = append(t.in, nil)
	t.down = append(t.down, false)
	t.nics = nil
	return len(t.Devices) - 1
}

// NICsOnNode is the number of NICs in host node (the rails it reaches);
// 0 for a node without NICs or node < 0.
func (t *Topology) NICsOnNode(node int) int {
	if t.nics == nil {
		t.nics = []int{}
		for _, d := range t.Devices {
			if d.Kind == NIC && d.Node >= 0 {
				for len(t.nics) <= d.Node {
					t.nics = append(t.nics, 0)
				}
				t.nics[d.Node]++
			}
		}
	}
	if node < 0 || node >= len(t.nics) {
		return 0
	}
	return t.nics[node]
}

// AddLink adds one directed link at full health and returns its id.
func (t *Topology) AddLink(src, dst int, bandwidthBytesPerS, latencyS float64, tech string) int {
	id := len(t.Links)
	t.Links = append(t.Links, Link{Src: src, Dst: dst, BandwidthBytesPerS: bandwidthBytesPerS,
		LatencyS: latencyS, Health: 1, Tech: tech})
	t.out[src] = append(t.out[src], int32(id))
	t.in[dst] = append(t.in[dst], int32(id))
	if _, ok := t.pair[key(src, dst)]; !ok {
		t.pair[key(src, dst)] = int32(id)
	}
	t.invalidate()
	return id
}

// Connect adds a link in each direction.
func (t *Topology) Connect(a, b int, bandwidthBytesPerS, latencyS float64, tech string) {
	t.AddLink(a, b, bandwidthBytesPerS, latencyS, tech)
	t.AddLink(b, a, bandwidthBytesPerS, latencyS, tech)
}

// SetRanks maps rank i to GPU device devs[i].
func (t *Topology) SetRanks(devs []int) error {
	seen := map[int]int{}
	for r, d := range devs {
		if d < 0 || d >= len(t.Devices) {
			return fmt.Errorf("rank %d: device %d does not exist (have %d)", r, d, len(t.Devices))
		}
		if t.Devices[d].Kind != GPU {
			return fmt.Errorf("rank %d: device %s is a %v, not a gpu", r, t.Devices[d].Name, t.Devices[d].Kind)
		}
		if prev, ok := seen[d]; ok {
			return fmt.Errorf("ranks %d and %d both map to device %s", prev, r, t.Devices[d].Name)
		}
		seen[d] = r
	}
	t.ranks = append([]int(nil), devs...)
	return nil
}

// NumRanks is the number of ranks.
func (t *Topology) NumRanks() int { return len(t.ranks) }

// RankDevice is the device of rank r.
func (t *Topology) RankDevice(r int) int { return t.ranks[r] }

// Ranks returns a copy of the rank -> device mapping.
func (t *Topology) Ranks() []int { return append([]int(nil), t.ranks...) }

// GPUs lists GPU device ids in id order.
func (t *Topology) GPUs() []int {
	var g []int
	for i, d := range t.Devices {
		if d.Kind == GPU {
			g = append(g, i)
		}
	}
	return g
}

// Out lists the links leaving device d. Do not modify.
func (t *Topology) Out(d int) []int32 { return t.out[d] }

// LinkBetween returns the first link from a to b.
func (t *Topology) LinkBetween(a, b int) (int, bool) {
	l, ok := t.pair[key(a, b)]
	return int(l), ok
}

// SetTwins records a and b as the two halves of one physical device (a
// PCIe switch split into up and down, so that no route turns back through
// it): a cable to it is a link to one half and one from the other.
func (t *Topology) SetTwins(a, b int) {
	if t.twin == nil {
		t.twin = map[int]int{}
	}
	t.twin[a], t.twin[b] = b, a
}

// Twin is d's other half where d is a split device (SetTwins), else d.
func (t *Topology) Twin(d int) int {
	if o, ok := t.twin[d]; ok {
		return o
	}
	return d
}

// Reverse is the link carrying the other direction of l's cable: from l's
// destination back to its source, or where an end is a split device, from
// or to its other half (GPU -> pcie.up is paired with pcie.down -> GPU).
func (t *Topology) Reverse(l int) (int, bool) {
	lk := t.Links[l]
	if r, ok := t.LinkBetween(lk.Dst, lk.Src); ok {
		return r, true
	}
	return t.LinkBetween(t.Twin(lk.Dst), t.Twin(lk.Src))
}

// CableEnds are the devices l's cable joins, a split device's halves
// counted as its lower id: both directions of a cable give the same ends,
// swapped.
func (t *Topology) CableEnds(l int) (a, b int) {
	lk := t.Links[l]
	return min(lk.Src, t.Twin(lk.Src)), min(lk.Dst, t.Twin(lk.Dst))
}

// LinkName is "src->dst".
func (t *Topology) LinkName(l int) string {
	return t.Devices[t.Links[l].Src].Name + "->" + t.Devices[t.Links[l].Dst].Name
}

// Usable reports whether routing may use link l.
func (t *Topology) Usable(l int) bool {
	k := &t.Links[l]
	return k.Health > 0 && !t.down[k.Src] && !t.down[k.Dst]
}

// Capacity is the link's current bandwidth: bandwidth × health, 0 when unusable.
func (t *Topology) Capacity(l int) float64 {
	if !t.Usable(l) {
		return 0
	}
	return t.Links[l].BandwidthBytesPerS * t.Links[l].Health
}

// SetHealth sets a link's health (clamped to [0, 1]) and invalidates routes
// when the link starts or stops being usable.
func (t *Topology) SetHealth(l int, h float64) {
	h = max(0, min(1, h))
	was := t.Links[l].Health > 0
	t.Links[l].Health = h
	t.capVer++
	if was != (h > 0) {
		t.invalidate()
	}
}

// SetDeviceDown fails (or restores) a device and every link touching it.
func (t *Topology) SetDeviceDown(d int, down bool) {
	if t.down[d] != down {
		t.down[d] = down
		t.capVer++
		t.invalidate()
	}
}

// DeviceDown reports whether device d has failed.
func (t *Topology) DeviceDown(d int) bool { return t.down[d] }

// Failed reports whether a device has failed or a link is down (health 0):
// routes may then leave the cluster's healthy ones.
func (t *Topology) Failed() bool {
	for _, down := range t.down {
		if down {
			return true
		}
	}
	for _, l := range t.Links {
		if l.Health == 0 {
			return true
		}
	}
	return false
}

// DeviceByName finds a device id.
func (t *Topology) DeviceByName(name string) (int, bool) {
	for i, d := range t.Devices {
		if d.Name == name {
			return i, true
		}
	}
	return 0, false
}

// NamePattern is a family of device names that differ only in their
// numbers: "n0.gpu0" … "n3.gpu7" is the pattern "n#.gpu#".
type NamePattern struct {
	Pattern     string
	First, Last string
}

// NamePatterns says how the devices are named, for an error that has to
// tell a user which names exist: each pattern with its first and last
// name, in the order the devices were added. A preset cluster of any size
// has a handful.
func (t *Topology) NamePatterns() []NamePattern {
	var order []NamePattern
	at := map[string]int{}
	for _, d := range t.Devices {
		k, _ := SplitNumbers(d.Name)
		if i, ok := at[k]; ok {
			order[i].Last = d.Name
			continue
		}
		at[k] = len(order)
		order = append(order, NamePattern{k, d.Name, d.Name})
	}
	return order
}

// SplitNumbers returns name with each run of digits replaced by "#", and
// the runs in order: "n12.gpu3" is "n#.gpu#" and ["12", "3"].
func SplitNumbers(name string) (pattern string, numbers []string) {
	var b strings.Builder
	for i := 0; i < len(name); {
		j := i
		for j < len(name) && name[j] >= '0' && name[j] <= '9' {
			j++
		}
		if j > i {
			b.WriteByte('#')
			numbers = append(numbers, name[i:j])
			i = j
			continue
		}
		b.WriteByte(name[i])
		i++
	}
	return b.String(), numbers
}

// FillNumbers puts numbers into a pattern's "#"s in order. Extra numbers
// are dropped from the end; with too few, the first "#"s take "0", so that
// "gpu3" in "n#.gpu#" is "n0.gpu3".
func FillNumbers(pattern string, numbers []string) string {
	if pad := strings.Count(pattern, "#") - len(numbers); pad > 0 {
		numbers = append(slices.Repeat([]string{"0"}, pad), numbers...)
	}
	var b strings.Builder
	for i := 0; i < len(pattern); i++ {
		if pattern[i] != '#' {
			b.WriteByte(pattern[i])
			continue
		}
		b.WriteString(numbers[0])
		numbers = numbers[1:]
	}
	return b.String()
}

// NodesOfRanks groups ranks by host node, in order of first appearance; ranks
// on devices without a node each form their own group.
func (t *Topology) NodesOfRanks(ranks []int) [][]int {
	idx := map[int]int{}
	var groups [][]int
	for _, r := range ranks {
		n := t.Devices[t.ranks[r]].Node
		if n < 0 {
			groups = append(groups, []int{r})
			continue
		}
		g, ok := idx[n]
		if !ok {
			g = len(groups)
			idx[n] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], r)
	}
	return groups
}

func (t *Topology) invalidate() {
	t.version++
	if len(t.routes) > 0 {
		t.routes = map[uint64][]int32{}
	}
}

// RoutesVersion changes whenever cached routes are dropped (a link or device
// started or stopped being usable), so callers may cache routes too.
func (t *Topology) RoutesVersion() uint64 { return t.version }

// CapacityVersion changes whenever any link's Capacity may have changed
// (health or device state set, links added), so callers may cache
// capacities.
func (t *Topology) CapacityVersion() uint64 { return t.capVer + t.version }

func key(a, b int) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// UnreachableError is a partitioned network: no usable path between pairs.
type UnreachableError struct {
	// Pairs are (src, dst) device names, sorted.
	Pairs [][2]string
	// Total counts all unreachable pairs found (Pairs may be truncated).
	Total int
	// Failed names the unusable links leaving a listed pair's source or
	// entering its destination ("src->dst", sorted): what a fault cut,
	// so that the user sees which of theirs partitioned the network.
	Failed []string
}

func (e *UnreachableError) Error() string {
	s := make([]string, len(e.Pairs))
	for i, p := range e.Pairs {
		s[i] = p[0] + " -> " + p[1]
	}
	more := ""
	if e.Total > len(e.Pairs) {
		more = fmt.Sprintf(" (and %d more)", e.Total-len(e.Pairs))
	}
	if len(e.Failed) > 0 {
		more += "; failed at their ends: " + strings.Join(e.Failed, ", ")
	}
	return fmt.Sprintf("network is partitioned: no usable path for %d pair(s): %s%s",
		e.Total, strings.Join(s, ", "), more)
}

// unreachable is the error for pairs of device indices that have no path,
// naming the unusable links at their ends.
func (t *Topology) unreachable(pairs [][2]int, total int) *UnreachableError {
	e := &UnreachableError{Total: total}
	failed := map[string]bool{}
	for _, p := range pairs {
		e.Pairs = append(e.Pairs, [2]string{t.Devices[p[0]].Name, t.Devices[p[1]].Name})
		for _, l := range slices.Concat(t.out[p[0]], t.in[p[1]]) {
			if !t.Usable(int(l)) {
				failed[t.LinkName(int(l))] = true
			}
		}
	}
	e.Failed = slices.Sorted(maps.Keys(failed))
	sort.Slice(e.Pairs, func(i, j int) bool {
		if e.Pairs[i][0] != e.Pairs[j][0] {
			return e.Pairs[i][0] < e.Pairs[j][0]
		}
		return e.Pairs[i][1] < e.Pairs[j][1]
	})
	return e
}

// CheckReachable returns an *UnreachableError listing (up to 10 of) the pairs
// of devices that cannot reach each other, or nil.
func (t *Topology) CheckReachable(pairs [][2]int) error {
	var bad [][2]int
	total := 0
	for _, p := range pairs {
		if _, err := t.Route(p[0], p[1]); err != nil {
			total++
			if len(bad) < 10 {
				bad = append(bad, p)
			}
		}
	}
	if total == 0 {
		return nil
	}
	return t.unreachable(bad, total)
}
