// Package collective is the "collective" scenario: how long a collective
// takes on a cluster, by size and algorithm, with congestion and faults.
package collective

import (
	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/eidolon-sim/eidolon/core/topo"
)

// SummaryRow is one (size, algorithm) run of the "summary" table.
type SummaryRow struct {
	// Collective and Algorithm run; Model is "flow" or "unaware".
	Collective string `arrow:"collective"`
	Algorithm  string `arrow:"algorithm"`
	Model      string `arrow:"model"`
	// SizeBytes by the nccl-tests convention.
	SizeBytes float64 `arrow:"size_bytes"`
	// Ranks per communicator; Communicators × Concurrent collectives ran at once.
	Ranks         int `arrow:"ranks"`
	Communicators int `arrow:"communicators"`
	Concurrent    int `arrow:"concurrent"`
	// TimeS from the common start to the last collective's end.
	TimeS float64 `arrow:"time_s"`
	// AlgbwBytesPerS = size / time (of the slowest collective); BusbwBytesPerS
	// = algbw × the nccl-tests factor (all_reduce 2(n−1)/n; all_gather,
	// reduce_scatter, all_to_all (n−1)/n; others 1).
	AlgbwBytesPerS float64 `arrow:"algbw_bytes_per_s"`
	BusbwBytesPerS float64 `arrow:"busbw_bytes_per_s"`
	// Flows and WireBytes summed over all collectives of the run.
	Flows     int     `arrow:"flows"`
	WireBytes float64 `arrow:"wire_bytes"`
	// For algorithm "nccl": what NCCL's tuner chose (algorithm "ring",
	// "tree" or "nvls"; protocol "LL", "LL128" or "Simple"), the channels
	// its kernel runs with, and NCCL's own estimate of the time; empty and
	// 0 otherwise.
	NCCLAlgorithm  string  `arrow:"nccl_algorithm"`
	NCCLProtocol   string  `arrow:"nccl_protocol"`
	NCCLChannels   int     `arrow:"nccl_channels"`
	NCCLModelTimeS float64 `arrow:"nccl_model_time_s"`
}

// LinkRow is one link that carried traffic in one run ("links" table).
type LinkRow struct {
	Algorithm string  `arrow:"algorithm"`
	SizeBytes float64 `arrow:"size_bytes"`
	Link      int     `arrow:"link"`
	Src       string  `arrow:"src"`
	Dst       string  `arrow:"dst"`
	Tech      string  `arrow:"tech"`
	// BandwidthBytesPerS healthy; Health at the end of the run.
	BandwidthBytesPerS float64 `arrow:"bandwidth_bytes_per_s"`
	Health             float64 `arrow:"health"`
	Bytes              float64 `arrow:"bytes"`
	// BusyS: time with at least one flow; Utilization = bytes /
	// (bandwidth × run time).
	BusyS       float64 `arrow:"busy_s"`
	Utilization float64 `arrow:"utilization"`
	PeakFlows   int     `arrow:"peak_flows"`
}

// FlowRow is one transfer ("flows" table, when the spec asks for it).
type FlowRow struct {
	Algorithm string  `arrow:"algorithm"`
	SizeBytes float64 `arrow:"size_bytes"`
	Flow      int64   `arrow:"flow"`
	Src       string  `arrow:"src"`
	Dst       string  `arrow:"dst"`
	Bytes     float64 `arrow:"bytes"`
	StartS    float64 `arrow:"start_s"`
	TxEndS    float64 `arrow:"tx_end_s"`
	// DeliveredS = tx_end_s + path latency.
	DeliveredS float64 `arrow:"delivered_s"`
	Hops       int     `arrow:"hops"`
}

// TimelineRow is one event of a run ("timeline" table): collective start
// and end, fault changes.
type TimelineRow struct {
	Algorithm string  `arrow:"algorithm"`
	SizeBytes float64 `arrow:"size_bytes"`
	TimeS     float64 `arrow:"time_s"`
	// Event: "start", "end", "link_health", "device_down", "device_up", "straggler".
	Event string `arrow:"event"`
	// Collective id, or -1 for faults.
	Collective int    `arrow:"collective"`
	Detail     string `arrow:"detail"`
}

// Kind registers the scenario.
func Kind() scenario.Kind {
	return scenario.Checked(scenario.Define("collective",
		"collective time, algbw and busbw by size and algorithm on a cluster, with congestion and faults",
		run), check)
}

// check makes a run's checks before it simulates: the cluster and faults
// built, the groups' ranks against it.
func check(cs *spec.Collective) error {
	f, _, _, err := net.FromSpec(sim.New(), cs.Cluster, cs.Faults, cs.Seed, cs.Model)
	if err != nil {
		return err
	}
	_, err = checkGroups(cs, f.Topology())
	return err
}

// checkGroups returns the groups to run (the spec's, or one rail-aligned
// group of every rank), each rank checked against the cluster's.
func checkGroups(cs *spec.Collective, tp *topo.Topology) ([][]int, error) {
	groups := cs.Groups
	if groups == nil {
		g := cs.Group
		if len(g) == 0 {
			g = railAligned(tp)
		}
		groups = [][]int{g}
	}
	var p spec.Problems
	for gi, g := range groups {
		for i, r := range g {
			if r >= tp.NumRanks() {
				path := spec.Index("group", i)
				if cs.Groups != nil {
					path = spec.Index(spec.Index("groups", gi), i)
				}
				p.Addf(path, "rank must be < %d (the cluster's rank count), got %d", tp.NumRanks(), r)
			}
		}
	}
	return groups, p.Err()
}

func run(env scenario.Env, cs *spec.Collective) (scenario.Result, error) {
	var out tables
	total := len(cs.SizesBytes) * len(cs.Algorithms)
	done := 0
	for _, alg := range cs.Algorithms {
		for _, size := range cs.SizesBytes {
			if err := runOne(env, cs, alg, size, &out); err != nil {
				return scenario.Result{}, err
			}
			done++
			env.Report(float64(done) / float64(total))
		}
	}
	var r scenario.Result
	r.Add("summary", out.summary)
	r.Add("links", out.links)
	if cs.Flows {
		r.Add("flows", out.flows)
	}
	r.Add("timeline", out.timeline)
	return r, nil
}

type tables struct {
	summary  []SummaryRow
	links    []LinkRow
	flows    []FlowRow
	timeline []TimelineRow
}

// railAligned lists every rank node by node, every other node backwards, so
// a ring in this order crosses between nodes on GPUs of the same local index
// (one rail: no spine hop on a rail-optimized fabric), as NCCL orders its
// rings. Ranks outside nodes keep their order.
func railAligned(tp *topo.Topology) []int {
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

func runOne(env scenario.Env, cs *spec.Collective, alg string, size float64, out *tables) error {
	k := sim.New()
	// Building a large cluster and starting a collective over many ranks
	// are long: both poll the run's context.
	k.Watch(env.Context())
	f, comms, faults, err := net.FromSpec(k, cs.Cluster, cs.Faults, cs.Seed, cs.Model)
	if err != nil {
		return err
	}
	tp := f.Topology()
	groups, err := checkGroups(cs, tp)
	if err != nil {
		return err
	}
	var q *net.Quantization
	if sq := cs.Quantization; sq != nil {
		q = &net.Quantization{ElemBytes: sq.ElemBytes, WireElemBytes: 1, BlockElems: sq.BlockElems, ScaleBytes: sq.ScaleBytes}
	}
	var flows []FlowRow
	if cs.Flows {
		f.OnDeliver(func(r net.FlowRecord) {
			flows = append(flows, FlowRow{Algorithm: alg, SizeBytes: size, Flow: r.ID,
				Src: tp.Devices[r.Src].Name, Dst: tp.Devices[r.Dst].Name, Bytes: r.Bytes,
				StartS: r.Start.Seconds(), TxEndS: r.TxEnd.Seconds(), DeliveredS: r.Delivered.Seconds(), Hops: r.Hops})
		})
	}
	var results []net.Result
	var timeline []TimelineRow
	for _, e := range faults {
		timeline = append(timeline, TimelineRow{Algorithm: alg, SizeBytes: size, TimeS: e.At.Seconds(),
			Event: e.What, Collective: -1, Detail: e.Describe(tp)})
	}
	for _, g := range groups {
		for c := 0; c < cs.Concurrent; c++ {
			col := net.Collective{Op: net.Op(cs.Collective), Algorithm: net.Algorithm(alg), Bytes: size,
				Ranks: g, Root: cs.Root, Chunks: cs.Chunks, Channels: cs.Channels, Quant: q, ProtocolEfficiency: cs.ProtocolEfficiency,
				Stream: cs.Ring == "stream"}
			id, err := comms.Start(col, func(r net.Result) { results = append(results, r) })
			if err != nil {
				return err
			}
			timeline = append(timeline, TimelineRow{Algorithm: alg, SizeBytes: size, TimeS: k.Now().Seconds(),
				Event: "start", Collective: id, Detail: cs.Collective + " " + alg})
		}
	}
	// Check cancellation between events (every CheckEvery events).
	if err := k.Run(env.Ctx); err != nil {
		return err
	}
	var end sim.Time
	row := SummaryRow{Collective: cs.Collective, Algorithm: alg, Model: cs.Model, SizeBytes: size,
		Ranks: len(groups[0]), Communicators: len(groups), Concurrent: cs.Concurrent}
	for _, r := range results {
		end = max(end, r.End)
		row.Flows += r.Flows
		row.WireBytes += r.WireBytes
		if c := r.NCCL; c != nil {
			row.NCCLAlgorithm, row.NCCLProtocol, row.NCCLChannels, row.NCCLModelTimeS = string(c.Algorithm), string(c.Protocol), c.Channels, c.ModelTimeS
		}
		timeline = append(timeline, TimelineRow{Algorithm: alg, SizeBytes: size, TimeS: r.End.Seconds(),
			Event: "end", Collective: r.ID, Detail: cs.Collective + " " + alg})
	}
	row.TimeS = end.Seconds()
	if row.TimeS > 0 {
		row.AlgbwBytesPerS = size / row.TimeS
		row.BusbwBytesPerS = row.AlgbwBytesPerS * net.BusBandwidthFactor(net.Op(cs.Collective), row.Ranks)
	}
	out.summary = append(out.summary, row)
	for _, st := range f.LinkStats() {
		if st.Bytes == 0 {
			continue
		}
		l := tp.Links[st.Link]
		util := 0.0
		if row.TimeS > 0 {
			util = st.Bytes / (st.BandwidthBytesPerS * row.TimeS)
		}
		out.links = append(out.links, LinkRow{Algorithm: alg, SizeBytes: size, Link: st.Link,
			Src: tp.Devices[st.Src].Name, Dst: tp.Devices[st.Dst].Name, Tech: l.Tech,
			BandwidthBytesPerS: st.BandwidthBytesPerS, Health: l.Health, Bytes: st.Bytes,
			BusyS: st.Busy.Seconds(), Utilization: util, PeakFlows: st.PeakFlows})
	}
	out.flows = append(out.flows, flows...)
	out.timeline = append(out.timeline, timeline...)
	return nil
}
