// Package collective is the "collective" scenario: how long a collective
// takes on a cluster, by size and algorithm, with congestion and faults.
package collective

import (
	"github.com/eidolon-sim/eidolon/core/job"
	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/spec"
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
	// Issue is how the calls were issued (spec "issue"); DeviceTimeS from
	// the common start to the last collective's end on the devices;
	// HostFloorS the shortest a call lasts as issued (0 for "device");
	// TimeS the larger of the two: what the benchmark loop times.
	Issue       string  `arrow:"issue"`
	DeviceTimeS float64 `arrow:"device_time_s"`
	HostFloorS  float64 `arrow:"host_floor_s"`
	TimeS       float64 `arrow:"time_s"`
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
// compiled, the groups' ranks against it.
func check(cs *spec.Collective) error { return job.CheckCollective("", cs) }

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

func runOne(env scenario.Env, cs *spec.Collective, alg string, size float64, out *tables) error {
	run, err := job.RunCollective(env.Context(), "", cs, alg, size, net.FaultPlan{}, cs.Flows)
	if err != nil {
		return err
	}
	tp, f := run.Topology, run.Fabric
	var timeline []TimelineRow
	for _, e := range run.Faults {
		timeline = append(timeline, TimelineRow{Algorithm: alg, SizeBytes: size, TimeS: e.At.Seconds(),
			Event: e.What, Collective: -1, Detail: e.Describe(tp)})
	}
	for _, st := range run.Started {
		timeline = append(timeline, TimelineRow{Algorithm: alg, SizeBytes: size, TimeS: st.At.Seconds(),
			Event: "start", Collective: st.ID, Detail: cs.Collective + " " + alg})
	}
	row := SummaryRow{Collective: cs.Collective, Algorithm: alg, Model: cs.Model, SizeBytes: size,
		Ranks: len(run.Groups[0]), Communicators: len(run.Groups), Concurrent: cs.Concurrent, Issue: cs.Issue}
	for _, r := range run.Results {
		row.Flows += r.Flows
		row.WireBytes += r.WireBytes
		if c := r.NCCL; c != nil {
			row.NCCLAlgorithm, row.NCCLProtocol, row.NCCLChannels, row.NCCLModelTimeS = string(c.Algorithm), string(c.Protocol), c.Channels, c.ModelTimeS
		}
		timeline = append(timeline, TimelineRow{Algorithm: alg, SizeBytes: size, TimeS: r.End.Seconds(),
			Event: "end", Collective: r.ID, Detail: cs.Collective + " " + alg})
	}
	row.DeviceTimeS, row.HostFloorS = run.End().Seconds(), run.HostFloor(cs)
	row.TimeS = max(row.DeviceTimeS, row.HostFloorS)
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
	for _, r := range run.Flows {
		out.flows = append(out.flows, FlowRow{Algorithm: alg, SizeBytes: size, Flow: r.ID,
			Src: tp.Devices[r.Src].Name, Dst: tp.Devices[r.Dst].Name, Bytes: r.Bytes,
			StartS: r.Start.Seconds(), TxEndS: r.TxEnd.Seconds(), DeliveredS: r.Delivered.Seconds(), Hops: r.Hops})
	}
	out.timeline = append(out.timeline, timeline...)
	return nil
}
