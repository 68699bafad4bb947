// Package faultsweep is the "fault_sweep" scenario kind: RAPID-LLM's
// resilience analysis. A base run (training step, inference batch or
// collective) is simulated healthy, then again under each fault set, drawn
// with the seed or enumerated one cable at a time; every sample is a full
// simulation. Tables: samples (one per fault set), links (criticality of
// each cable faulted alone), summary (slowdown percentiles, share that
// cannot run), cables (the cluster's connections, to draw them on).
//
// Training and inference samples reuse everything the fault does not
// change: the workload plan, the priced operators and the topology with its
// cached routes (restored to the base's health after each sample; routes
// survive degradations and are recomputed only after a failure).
package faultsweep

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/eidolon-sim/eidolon/core/compile"
	"github.com/eidolon-sim/eidolon/core/job"
	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/eidolon-sim/eidolon/core/rng"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/eidolon-sim/eidolon/core/stats"
	"github.com/eidolon-sim/eidolon/core/topo"
)

// Kind registers the scenario.
func Kind() scenario.Kind {
	return scenario.Checked(scenario.Define("fault_sweep",
		"a training/inference/collective run under many sampled or enumerated fault sets: slowdown per sample, link criticality, percentiles",
		Run), Check)
}

// communicatorsSpan refuses a collective base whose communicators all hold
// one rank: such a collective moves nothing and takes no time, so no fault
// can slow it and slowdowns are undefined.
func communicatorsSpan(cs *spec.Collective, t *topo.Topology) error {
	groups, err := job.CollectiveGroups("collective", cs, t)
	if err != nil {
		return err
	}
	for _, g := range groups {
		if len(g) > 1 {
			return nil
		}
	}
	path := "collective.group"
	if cs.Groups != nil {
		path = "collective.groups"
	}
	var p spec.Problems
	p.Addf(path, "a fault sweep needs a communicator of at least 2 ranks (one rank's collective takes no time, so nothing can slow it)")
	return p.Err()
}

// Check makes a sweep's checks before it simulates: its base compiled
// under the base's path (cluster, GPU, fault device names, then the layout
// or the groups), and the fault counts against the cluster.
func Check(s *spec.FaultSweep) error {
	kind := s.BaseKind()
	var c spec.Cluster
	var err error
	switch kind {
	case "training":
		err = job.CheckTraining(kind, s.Training, false)
		c = s.Training.Cluster
	case "inference":
		err = job.CheckInference(kind, s.Inference, false)
		c = s.Inference.Cluster
	case "collective":
		err = job.CheckCollective(kind, s.Collective)
		c = s.Collective.Cluster
	default:
		return fmt.Errorf("fault_sweep: no base run")
	}
	if err != nil {
		return err
	}
	t, err := compile.Topology(kind, c)
	if err != nil {
		return err
	}
	_, _, err = plan(s, t)
	return err
}

// plan is the sweep on a built cluster: the eligible cables and the fault
// sets, after the checks that need the cluster (a collective base's
// communicators, a single-link sweep's budget). Check and Run both make
// them, so that the run refuses what validate refuses.
func plan(s *spec.FaultSweep, t *topo.Topology) ([]cable, []faultSet, error) {
	if s.BaseKind() == "collective" {
		if err := communicatorsSpan(s.Collective, t); err != nil {
			return nil, nil, err
		}
	}
	cables := eligible(t, s)
	sets, err := faultSets(s, t, cables)
	if err != nil {
		return nil, nil, err
	}
	return cables, sets, singleLinkBudget(s, sets)
}

// singleLinkBudget holds a single-link sweep to max_events. The spec's
// budget counts one run in this mode (the cables are known once the
// cluster is built): every cable of a large cluster, each degraded and
// failed, is hours of runs.
func singleLinkBudget(s *spec.FaultSweep, sets []faultSet) error {
	if s.Mode != "single_link" {
		return nil
	}
	b := s.Budget()
	runs := float64(len(sets))/float64(max(s.Shards, 1)) + 1
	b.Events *= runs
	b.EventFields = append([]string{"cables"}, b.EventFields...)
	b.Detail += fmt.Sprintf(", %.0f runs: the healthy one and %d single-cable faults", runs, len(sets))
	return spec.CheckBudget(b, 0, s.MaxEvents)
}

// SampleRow is one fault set ("samples" table).
type SampleRow struct {
	// Sample numbers the fault sets from 0.
	Sample int `arrow:"sample"`
	// Faults lists the fault set, "; "-separated: "a<->b failed",
	// "a<->b health 0.5", "n3.nic5 failed", "n0.gpu2 slowdown 1.5".
	Faults string `arrow:"faults"`
	// Counts of each kind of fault in the set.
	LinkFailures     int `arrow:"link_failures"`
	LinkDegradations int `arrow:"link_degradations"`
	DeviceFailures   int `arrow:"device_failures"`
	Stragglers       int `arrow:"stragglers"`
	// StepTimeS is the simulated time under the faults: the training step,
	// the inference batch end to end, or the collective; null when failed.
	StepTimeS *float64 `arrow:"step_time_s"`
	// Slowdown = step_time_s / the healthy run's (below 1 happens: a
	// degraded or rerouted flow can free capacity for others).
	Slowdown *float64 `arrow:"slowdown"`
	// Failed when the run cannot complete; Reason says why (e.g. the
	// network is partitioned, naming the unreachable pairs).
	Failed bool   `arrow:"failed"`
	Reason string `arrow:"reason"`
}

// Cable describes one connection of the cluster: the columns the "links"
// and "cables" tables share.
type Cable struct {
	// Link is the topology id of the cable's first direction; Src and Dst
	// its device names, SrcKind and DstKind gpu, nic or switch.
	Link    int    `arrow:"link"`
	Src     string `arrow:"src"`
	Dst     string `arrow:"dst"`
	SrcKind string `arrow:"src_kind"`
	DstKind string `arrow:"dst_kind"`
	Tech    string `arrow:"tech"`
	// Scope: "node" (both ends in one host) or "fabric".
	Scope              string  `arrow:"scope"`
	BandwidthBytesPerS float64 `arrow:"bandwidth_bytes_per_s"`
	// HealthyBytes the healthy run sent over it, both directions. A
	// collective repeated on an isolated communicator (tensor parallel
	// inside a node) reuses the first one's simulated time without
	// resending, so in-node cables show only part of their traffic.
	HealthyBytes float64 `arrow:"healthy_bytes"`
}

// LinkRow is the criticality of one cable, from the samples in which it was
// the only fault ("links" table).
type LinkRow struct {
	Cable
	// DegradedSlowdown when the cable alone runs at DegradedHealth; null
	// when not simulated or the run failed.
	DegradedHealth   float64  `arrow:"degraded_health"`
	DegradedSlowdown *float64 `arrow:"degraded_slowdown"`
	// FailedSlowdown when the cable alone fails; null when not simulated or
	// when the run cannot complete (FailedReason says why).
	FailedSlowdown *float64 `arrow:"failed_slowdown"`
	FailedReason   string   `arrow:"failed_reason"`
}

// CableRow is one connection of the cluster ("cables" table): the topology
// the criticality is drawn on.
type CableRow struct {
	Cable
	// Eligible: the sweep's faults may hit it (spec field links).
	Eligible bool `arrow:"eligible"`
}

// SummaryRow is the one row of the "summary" table.
type SummaryRow struct {
	// Base kind ("training", "inference", "collective") and Mode.
	Base string `arrow:"base"`
	Mode string `arrow:"mode"`
	// HealthyStepTimeS is the base run without sampled faults.
	HealthyStepTimeS float64 `arrow:"healthy_step_time_s"`
	// EligibleCables is how many cables the faults could hit.
	EligibleCables int `arrow:"eligible_cables"`
	Samples        int `arrow:"samples"`
	// FailedSamples could not run; FailedShare = failed_samples / samples.
	FailedSamples int     `arrow:"failed_samples"`
	FailedShare   float64 `arrow:"failed_share"`
	// Slowdown percentiles over the samples that ran (linear interpolation
	// between order statistics, as numpy.quantile); null when none ran.
	SlowdownP50  *float64 `arrow:"slowdown_p50"`
	SlowdownP90  *float64 `arrow:"slowdown_p90"`
	SlowdownP99  *float64 `arrow:"slowdown_p99"`
	SlowdownMean *float64 `arrow:"slowdown_mean"`
	SlowdownMax  *float64 `arrow:"slowdown_max"`
}

// cable is one connection: its first direction and, when present, the reverse.
type cable struct {
	link, rev int
	a, b      int // devices
	scope     string
}

// faultSet is one sample's faults on top of the base's.
type faultSet struct {
	cables     []int     // indices into the cable list
	health     []float64 // per cable: 0 failed, else degraded
	devices    []int     // failed devices
	stragglers []int     // straggling GPUs
	slowdown   float64
	// group keeps samples on one shard together: the sample's index, or in
	// single_link mode its cable's, so a cable's faults share a links row.
	group int
}

// Run simulates the healthy base and every fault set.
func Run(env scenario.Env, s *spec.FaultSweep) (scenario.Result, error) {
	b, err := newBase(s, env.Canceled)
	if err != nil {
		return scenario.Result{}, err
	}
	t := b.topology()
	cables, sets, err := plan(s, t)
	if err != nil {
		return scenario.Result{}, err
	}
	healthy, err := b.run(env, net.FaultPlan{})
	if err != nil {
		if errors.As(err, new(*spec.Error)) {
			return scenario.Result{}, err
		}
		return scenario.Result{}, fmt.Errorf("the base run, before the sweep's faults (with the base spec's own faults, if it has any), fails: %w", err)
	}
	if !(healthy.timeS > 0) {
		return scenario.Result{}, fmt.Errorf("the base run, before the sweep's faults, takes no time (%v s): slowdowns are undefined", healthy.timeS)
	}
	var mine []int // the samples of this shard
	for i, fs := range sets {
		if fs.group%s.Shards == s.Shard {
			mine = append(mine, i)
		}
	}
	env.Report(1 / float64(len(mine)+1))
	rows := make([]SampleRow, len(mine))
	for k, i := range mine {
		if err := env.Canceled(); err != nil {
			return scenario.Result{}, err
		}
		row, err := runSample(env, b, t, cables, i, sets[i], healthy.timeS)
		if err != nil {
			return scenario.Result{}, err
		}
		rows[k] = row
		env.Report(float64(k+2) / float64(len(mine)+1))
	}
	var r scenario.Result
	r.Add("samples", rows)
	r.Add("links", linkRows(t, s, cables, sets, mine, rows, healthy.bytes))
	r.Add("summary", []SummaryRow{summarize(s, healthy.timeS, len(cables), rows)})
	r.Add("cables", cableRows(t, cables, healthy.bytes))
	return r, nil
}

// runSample simulates one fault set; a run that cannot complete is a failed
// sample, cancellation and spec errors end the sweep.
func runSample(env scenario.Env, b base, t *topo.Topology, cables []cable, i int, fs faultSet, healthyS float64) (SampleRow, error) {
	faults, desc := fs.plan(t, cables)
	row := SampleRow{Sample: i, Faults: desc, DeviceFailures: len(fs.devices), Stragglers: len(fs.stragglers)}
	for _, h := range fs.health {
		if h == 0 {
			row.LinkFailures++
		} else {
			row.LinkDegradations++
		}
	}
	out, err := b.run(env, faults)
	if err != nil {
		if cerr := env.Canceled(); cerr != nil {
			return row, cerr
		}
		if errors.As(err, new(*spec.Error)) {
			return row, err
		}
		row.Failed, row.Reason = true, err.Error()
		return row, nil
	}
	step, slow := out.timeS, out.timeS/healthyS
	row.StepTimeS, row.Slowdown = &step, &slow
	return row, nil
}

// plan converts a fault set to a fault plan of t's ids (a cable's link
// and its reverse, as the spec's both_directions resolves them), and
// describes it.
func (fs faultSet) plan(t *topo.Topology, cables []cable) (net.FaultPlan, string) {
	var f net.FaultPlan
	var parts []string
	for k, ci := range fs.cables {
		c := cables[ci]
		h := fs.health[k]
		f.Links = append(f.Links, net.LinkFault{Link: c.link, Health: h})
		if c.rev >= 0 {
			f.Links = append(f.Links, net.LinkFault{Link: c.rev, Health: h})
		}
		// "<->" a cable (both_directions in a fault spec), "->" a link alone
		ends := t.Devices[c.a].Name + "<->" + t.Devices[c.b].Name
		if c.rev < 0 {
			ends = t.LinkName(c.link)
		}
		if h == 0 {
			parts = append(parts, ends+" failed")
		} else {
			parts = append(parts, fmt.Sprintf("%s health %.3g", ends, h))
		}
	}
	for _, d := range fs.devices {
		f.Devices = append(f.Devices, net.DeviceFault{Device: d})
		parts = append(parts, t.Devices[d].Name+" failed")
	}
	for _, g := range fs.stragglers {
		f.Stragglers = append(f.Stragglers, net.Straggler{Device: g, Slowdown: fs.slowdown})
		parts = append(parts, fmt.Sprintf("%s slowdown %.3g", t.Devices[g].Name, fs.slowdown))
	}
	return f, strings.Join(parts, "; ")
}

// cablesOf lists the topology's connections in link order: a link and its
// reverse (topo.Reverse: to a split PCIe switch, GPU -> pcie.up and
// pcie.down -> GPU) form one cable, named from the first of the two.
func cablesOf(t *topo.Topology) []cable {
	seen := map[[2]int]bool{}
	var out []cable
	for l, lk := range t.Links {
		a, b := t.CableEnds(l)
		k := [2]int{min(a, b), max(a, b)}
		if seen[k] {
			continue
		}
		seen[k] = true
		c := cable{link: l, rev: -1, a: lk.Src, b: lk.Dst, scope: "fabric"}
		if r, ok := t.Reverse(l); ok {
			c.rev = r
		}
		da, db := t.Devices[lk.Src], t.Devices[lk.Dst]
		if da.Node >= 0 && da.Node == db.Node {
			c.scope = "node"
		}
		out = append(out, c)
	}
	return out
}

// eligible are the cables faults may hit: those in the sweep's scope.
func eligible(t *topo.Topology, s *spec.FaultSweep) []cable {
	var out []cable
	for _, c := range cablesOf(t) {
		if s.Links == "all" || c.scope == s.Links {
			out = append(out, c)
		}
	}
	return out
}

// bytes both directions of the cable carried.
func (c cable) bytes(perLink []float64) float64 {
	if perLink == nil {
		return 0
	}
	b := perLink[c.link]
	if c.rev >= 0 {
		b += perLink[c.rev]
	}
	return b
}

// faultSets draws or enumerates the samples. Sample i of "sample" mode
// depends only on the seed and i, so a longer sweep extends a shorter one.
func faultSets(s *spec.FaultSweep, t *topo.Topology, cables []cable) ([]faultSet, error) {
	if s.Mode == "single_link" {
		return singleLinkSets(s, cables), nil
	}
	var nics, switches, gpus []int
	for d, dev := range t.Devices {
		switch dev.Kind {
		case topo.NIC:
			nics = append(nics, d)
		case topo.Switch:
			switches = append(switches, d)
		}
	}
	gpus = t.Ranks()
	var p spec.Problems
	for _, c := range []struct {
		field string
		want  int
		have  int
		what  string
	}{{"link_failures", s.LinkFailures + s.LinkDegradations, len(cables), "eligible cables (link_failures + link_degradations)"},
		{"nic_failures", s.NICFailures, len(nics), "NICs"},
		{"switch_failures", s.SwitchFailures, len(switches), "switches"},
		{"stragglers", s.Stragglers, len(gpus), "GPUs with a rank"}} {
		if c.want > c.have {
			p.Addf(c.field, "the cluster has %d %s, the sweep asks for %d", c.have, c.what, c.want)
		}
	}
	if err := p.Err(); err != nil {
		return nil, err
	}
	sets := make([]faultSet, s.Samples)
	for i := range sets {
		r := rng.Stream(rng.Mix(s.Seed, uint64(i)), "fault_sweep")
		fs := faultSet{slowdown: s.StragglerSlowdown, group: i}
		for k, ci := range pick(r.Perm, len(cables), s.LinkFailures+s.LinkDegradations) {
			h := 0.0
			if k >= s.LinkFailures {
				h = s.DegradedHealth
			}
			fs.cables = append(fs.cables, ci)
			fs.health = append(fs.health, h)
		}
		for _, k := range pick(r.Perm, len(nics), s.NICFailures) {
			fs.devices = append(fs.devices, nics[k])
		}
		for _, k := range pick(r.Perm, len(switches), s.SwitchFailures) {
			fs.devices = append(fs.devices, switches[k])
		}
		for _, k := range pick(r.Perm, len(gpus), s.Stragglers) {
			fs.stragglers = append(fs.stragglers, gpus[k])
		}
		sets[i] = fs
	}
	return sets, nil
}

// pick draws k distinct indices below n (none drawn when k is 0).
func pick(perm func(int) []int, n, k int) []int {
	if k == 0 {
		return nil
	}
	return perm(n)[:k]
}

// singleLinkSets enumerates each eligible cable (or a seeded subset of
// Cables of them, in cable order) degraded alone, then failed alone.
func singleLinkSets(s *spec.FaultSweep, cables []cable) []faultSet {
	chosen := make([]int, len(cables))
	for i := range chosen {
		chosen[i] = i
	}
	if s.Cables > 0 && s.Cables < len(cables) {
		chosen = rng.Stream(s.Seed, "fault_sweep_cables").Perm(len(cables))[:s.Cables]
		sort.Ints(chosen)
	}
	var healths []float64
	if s.SingleLinkFaults != "fail" {
		healths = append(healths, s.DegradedHealth)
	}
	if s.SingleLinkFaults != "degrade" {
		healths = append(healths, 0)
	}
	var sets []faultSet
	for g, ci := range chosen {
		for _, h := range healths {
			sets = append(sets, faultSet{cables: []int{ci}, health: []float64{h}, group: g})
		}
	}
	return sets
}

// linkRows collects, per cable, the samples where it was the only fault.
func linkRows(t *topo.Topology, s *spec.FaultSweep, cables []cable, sets []faultSet, mine []int, rows []SampleRow, bytes []float64) []LinkRow {
	byCable := map[int]*LinkRow{}
	var order []int
	for k, i := range mine {
		fs := sets[i]
		if len(fs.cables) != 1 || len(fs.devices) > 0 || len(fs.stragglers) > 0 {
			continue
		}
		ci := fs.cables[0]
		lr, ok := byCable[ci]
		if !ok {
			c := cableRow(t, cables[ci], bytes, true)
			lr = &LinkRow{Cable: c.Cable, DegradedHealth: s.DegradedHealth}
			byCable[ci] = lr
			order = append(order, ci)
		}
		if fs.health[0] == 0 {
			lr.FailedSlowdown, lr.FailedReason = rows[k].Slowdown, rows[k].Reason
		} else {
			lr.DegradedSlowdown = rows[k].Slowdown
		}
	}
	sort.Ints(order)
	out := make([]LinkRow, len(order))
	for i, ci := range order {
		out[i] = *byCable[ci]
	}
	return out
}

// cableRow describes a cable.
func cableRow(t *topo.Topology, c cable, bytes []float64, eligible bool) CableRow {
	lk := t.Links[c.link]
	return CableRow{Cable: Cable{Link: c.link, Src: t.Devices[c.a].Name, Dst: t.Devices[c.b].Name,
		SrcKind: t.Devices[c.a].Kind.String(), DstKind: t.Devices[c.b].Kind.String(), Tech: lk.Tech,
		Scope: c.scope, BandwidthBytesPerS: lk.BandwidthBytesPerS, HealthyBytes: c.bytes(bytes)}, Eligible: eligible}
}

// cableRows lists every cable of the cluster.
func cableRows(t *topo.Topology, eligible []cable, bytes []float64) []CableRow {
	ok := map[int]bool{}
	for _, c := range eligible {
		ok[c.link] = true
	}
	all := cablesOf(t)
	rows := make([]CableRow, len(all))
	for i, c := range all {
		rows[i] = cableRow(t, c, bytes, ok[c.link])
	}
	return rows
}

func summarize(s *spec.FaultSweep, healthyS float64, eligible int, rows []SampleRow) SummaryRow {
	sum := SummaryRow{Base: s.BaseKind(), Mode: s.Mode, HealthyStepTimeS: healthyS, EligibleCables: eligible, Samples: len(rows)}
	var slow []float64
	for _, r := range rows {
		if r.Failed {
			sum.FailedSamples++
		} else {
			slow = append(slow, *r.Slowdown)
		}
	}
	if len(rows) > 0 {
		sum.FailedShare = float64(sum.FailedSamples) / float64(len(rows))
	}
	if len(slow) == 0 {
		return sum
	}
	sort.Float64s(slow)
	ptr := func(v float64) *float64 { return &v }
	mean := 0.0
	for _, v := range slow {
		mean += v
	}
	sum.SlowdownP50, sum.SlowdownP90, sum.SlowdownP99 = ptr(stats.Quantile(slow, 0.5)), ptr(stats.Quantile(slow, 0.9)), ptr(stats.Quantile(slow, 0.99))
	sum.SlowdownMean, sum.SlowdownMax = ptr(mean/float64(len(slow))), ptr(slow[len(slow)-1])
	return sum
}
