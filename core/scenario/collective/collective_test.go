package collective_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/eidolon-sim/eidolon/core/scenario/collective"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/eidolon-sim/eidolon/core/topo"
)

func runSpec(t *testing.T, doc string) scenario.Result {
	t.Helper()
	_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(doc))
	require.NoError(t, err)
	return res
}

func table[T any](t *testing.T, r scenario.Result, name string) []T {
	for _, tb := range r.Tables {
		if tb.Name == name {
			return tb.Rows.([]T)
		}
	}
	t.Fatalf("no table %q", name)
	return nil
}

func TestDGXSweepTables(t *testing.T) {
	res := runSpec(t, `{"kind":"collective","cluster":{"preset":"dgx-h100","nodes":2},
		"algorithms":["ring","tree","hierarchical"],"sizes_bytes":[1048576,1073741824],"flows":true}`)
	sum := table[collective.SummaryRow](t, res, "summary")
	require.Len(t, sum, 6)
	for _, r := range sum {
		require.Equal(t, 16, r.Ranks)
		require.Greater(t, r.TimeS, 0.0)
		// busbw = algbw·2(n−1)/n for all_reduce (nccl-tests).
		require.InEpsilon(t, r.AlgbwBytesPerS*2*15/16, r.BusbwBytesPerS, 1e-12)
		// Eight NDR NICs per node at 50 GB/s bound a 2-node all-reduce's
		// busbw well below NVLink's 450 GB/s.
		require.Less(t, r.BusbwBytesPerS, 450e9)
	}
	links := table[collective.LinkRow](t, res, "links")
	require.NotEmpty(t, links)
	for _, l := range links {
		require.LessOrEqual(t, l.Utilization, 1+1e-9, "%s->%s", l.Src, l.Dst)
	}
	require.NotEmpty(t, table[collective.FlowRow](t, res, "flows"))
	require.NotEmpty(t, table[collective.TimelineRow](t, res, "timeline"))
}

func TestFaultsSlowDownAndPartitionIsAnError(t *testing.T) {
	base := runSpec(t, `{"kind":"collective","cluster":{"preset":"dgx-h100","nodes":2},"algorithms":["ring"]}`)
	deg := runSpec(t, `{"kind":"collective","cluster":{"preset":"dgx-h100","nodes":2},"algorithms":["ring"],
		"faults":{"links":[{"src":"n0.nic7","dst":"rail7.leaf0","health":0.5},
		                   {"src":"rail7.leaf0","dst":"spine0","health":0,"both_directions":true}]}}`)
	tb := table[collective.SummaryRow](t, base, "summary")[0].TimeS
	td := table[collective.SummaryRow](t, deg, "summary")[0].TimeS
	// The ring runs as 8 channels by default, one per rail; the channel
	// leaving node 0 on rail 7 (n0.gpu7 -> n0.nic7 -> rail7.leaf0) has that
	// hop as its bottleneck, and at half health it takes nearly twice as
	// long (latency terms do not scale); the all-reduce ends with it.
	require.InEpsilon(t, 2*tb, td, 0.05)

	_, _, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(`{"kind":"collective",
		"cluster":{"preset":"dgx-h100","nodes":2},
		"faults":{"devices":[{"device":"n0.nic7"}]}}`))
	require.Error(t, err)
	require.Contains(t, err.Error(), "partitioned")
	require.Contains(t, err.Error(), "n0.gpu7 -> n1.gpu")
}

func TestSpecErrorsNameFields(t *testing.T) {
	_, _, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(`{"kind":"collective",
		"cluster":{"preset":"dgx-h900"},"algorithms":["rign"],"sizes_bytes":[-5],
		"faults":{"links":[{"src":"a","dst":"b","health":2}]}}`))
	var se *spec.Error
	require.ErrorAs(t, err, &se)
	msg := err.Error()
	for _, want := range []string{"cluster.preset", "algorithms[0]", `did you mean "ring"`, "sizes_bytes[0]", "faults.links[0].health"} {
		require.Contains(t, msg, want)
	}
	_, _, err = all.Run(scenario.Env{Ctx: context.Background()}, []byte(`{"kind":"collective",
		"cluster":{"preset":"dgx-h100"},"faults":{"devices":[{"device":"n9.gpu0"}]}}`))
	require.ErrorAs(t, err, &se)
	require.Contains(t, err.Error(), "faults.devices[0].device")
	// root indexes the communicator (the smallest of several groups), so
	// validation refuses one past it, as a fault sweep's base too, where
	// the run would fail only once its collective starts.
	for _, js := range []string{
		`{"kind":"collective","cluster":{"preset":"dgx-a100"},"collective":"broadcast","group":[0,1,2,3],"root":4}`,
		`{"kind":"collective","cluster":{"preset":"dgx-a100"},"collective":"reduce","groups":[[0,1,2],[3,4]],"root":2}`,
		`{"kind":"fault_sweep","mode":"sample","samples":2,"link_failures":1,"collective":{"cluster":{"preset":"dgx-a100"},"collective":"broadcast","root":8}}`,
	} {
		err := all.Validate([]byte(js), 0)
		require.ErrorAs(t, err, &se, js)
		require.Contains(t, err.Error(), "root: must be an index into every communicator", js)
	}
	require.NoError(t, all.Validate([]byte(`{"kind":"collective","cluster":{"preset":"dgx-a100"},"collective":"broadcast","root":7}`), 0))
}

func TestChannelsUseEveryNIC(t *testing.T) {
	// One ring crosses between two dgx-h100 nodes through one NDR NIC
	// (50 GB/s, of which a collective carries 47: its collective
	// efficiency) each way, so its busbw is ≈ 47 GB/s; eight channels
	// rotate the in-node order so each crosses through a different NIC:
	// ≈ 8× that.
	busbw := func(ch string) float64 {
		res := runSpec(t, `{"kind":"collective","cluster":{"preset":"dgx-h100","nodes":2},"channels":`+ch+`}`)
		return table[collective.SummaryRow](t, res, "summary")[0].BusbwBytesPerS
	}
	ndr, ok := hw.LinkByName("ib-ndr")
	require.True(t, ok)
	nic := ndr.BandwidthBytesPerS * ndr.CollectiveEfficiency
	one, eight := busbw("1"), busbw("8")
	require.InEpsilon(t, nic, one, 0.01)
	require.Greater(t, eight, 6*one)
	require.LessOrEqual(t, eight, 8*nic)
}

func TestUnawareModelIsNeverSlower(t *testing.T) {
	// Same spec, congestion ignored: every transfer runs as if alone, so the
	// collective can only be as fast or faster (direct all-reduce shares
	// every uplink among n−1 flows).
	doc := `{"kind":"collective","cluster":{"preset":"dgx-h100","nodes":2},"algorithms":["direct","ring"],"model":"%s"}`
	flow := table[collective.SummaryRow](t, runSpec(t, fmt.Sprintf(doc, "flow")), "summary")
	unaware := table[collective.SummaryRow](t, runSpec(t, fmt.Sprintf(doc, "unaware")), "summary")
	for i := range flow {
		require.LessOrEqual(t, unaware[i].TimeS, flow[i].TimeS*(1+1e-9), flow[i].Algorithm)
	}
	require.Less(t, unaware[0].TimeS, 0.5*flow[0].TimeS, "direct: n−1 flows share each uplink")
}

func TestGroupsConcurrentAndQuantization(t *testing.T) {
	// Two communicators (the GPUs of each node) with two all-reduces each,
	// all at once: four collectives, and each node's NVSwitch ports carry two.
	res := runSpec(t, `{"kind":"collective","cluster":{"preset":"dgx-h100","nodes":2},
		"groups":[[0,1,2,3,4,5,6,7],[8,9,10,11,12,13,14,15]],"concurrent":2,"sizes_bytes":[268435456],"algorithms":["ring"]}`)
	row := table[collective.SummaryRow](t, res, "summary")[0]
	require.Equal(t, 2, row.Communicators)
	require.Equal(t, 2, row.Concurrent)
	require.Equal(t, 8, row.Ranks)
	ends := 0
	for _, e := range table[collective.TimelineRow](t, res, "timeline") {
		if e.Event == "end" {
			ends++
		}
	}
	require.Equal(t, 4, ends)
	single := table[collective.SummaryRow](t, runSpec(t, `{"kind":"collective","cluster":{"preset":"dgx-h100","nodes":1},"sizes_bytes":[268435456],"algorithms":["ring"]}`), "summary")[0]
	// Two all-reduces share each port: about twice the time of one.
	require.InEpsilon(t, 2*single.TimeS, row.TimeS, 0.02)
	// An empty list of groups is one communicator of every rank, as
	// leaving it out is (it once indexed a group that was not there).
	empty := table[collective.SummaryRow](t, runSpec(t, `{"kind":"collective","cluster":{"preset":"dgx-h100","nodes":1},"groups":[],"sizes_bytes":[268435456],"algorithms":["ring"]}`), "summary")[0]
	require.Equal(t, single, empty)

	// int8 with fp32 scales per 128 bf16 elements: wire = S/2·(1 + 4/128).
	q := table[collective.SummaryRow](t, runSpec(t, `{"kind":"collective","cluster":{"preset":"dgx-h100","nodes":1},
		"sizes_bytes":[268435456],"quantization":{"format":"int8"}}`), "summary")[0]
	require.InEpsilon(t, single.WireBytes/2*(1+4.0/128), q.WireBytes, 1e-9)
	require.Less(t, q.TimeS, 0.6*single.TimeS)
}

func TestRingStreamsAgreeWithSteps(t *testing.T) {
	// The default ring on four dgx-h100 nodes (eight channels, one per
	// rail, sharing the GPUs' NVLink ports) by steps and as streams, with
	// one flow per channel instead of one per rank per step. At 10 GB both
	// are bandwidth-bound: the same busbw within 1%. At 1 MB latency rules:
	// a stream pays each hop's latency once per step along the ring (as
	// NCCL's own model sums intra- and inter-node step latencies), steps
	// with one message in flight per connection pay the slowest (network)
	// hop every step, so streams are faster.
	doc := `{"kind":"collective","cluster":{"preset":"dgx-h100","nodes":4},"sizes_bytes":[1e6,1e10],"algorithms":["ring"],"ring":"%s"}`
	steps := table[collective.SummaryRow](t, runSpec(t, fmt.Sprintf(doc, "steps")), "summary")
	streams := table[collective.SummaryRow](t, runSpec(t, fmt.Sprintf(doc, "stream")), "summary")
	for i := range steps {
		require.Equal(t, 8, streams[i].Flows)
		require.Equal(t, 8*2*31*32, steps[i].Flows)
	}
	require.Less(t, streams[0].TimeS, steps[0].TimeS, "1 MB")
	require.InEpsilon(t, steps[1].BusbwBytesPerS, streams[1].BusbwBytesPerS, 0.01, "10 GB")
}

// Algorithm "nccl" asks NCCL's tuner (the model the training kinds use):
// on one DGX A100 a 1 MiB all-reduce is ring/LL and 256 MiB ring/Simple,
// each taking the tuner's latency + bytes/algbw, with the choice in the
// summary's nccl_* columns.
func TestNCCLAlgorithm(t *testing.T) {
	res := runSpec(t, `{"kind":"collective","cluster":{"preset":"dgx-a100","nodes":1},"algorithms":["nccl","ring"],
		"sizes_bytes":[1048576,268435456],"ring":"stream"}`)
	sum := table[collective.SummaryRow](t, res, "summary")
	require.Len(t, sum, 4)
	tp, err := topo.Preset("dgx-a100", 1)
	require.NoError(t, err)
	tu, err := net.NewNCCLTuner(tp, []int{0, 1, 2, 3, 4, 5, 6, 7})
	require.NoError(t, err)
	for i, proto := range []string{"LL", "Simple"} {
		r := sum[i]
		require.Equal(t, "nccl", r.Algorithm)
		require.Equal(t, "ring", r.NCCLAlgorithm)
		require.Equal(t, proto, r.NCCLProtocol)
		require.Equal(t, 24, r.NCCLChannels)
		ch, err := tu.Choose(net.AllReduce, r.SizeBytes)
		require.NoError(t, err)
		require.InEpsilon(t, ch.TimeS(r.SizeBytes), r.TimeS, 1e-6)
		require.Greater(t, r.TimeS, sum[2+i].TimeS, "NCCL is slower than the ideal ring")
		require.Empty(t, sum[2+i].NCCLProtocol)
	}
}

// A benchmark loop's calls last at least the host's part: nccl-tests -g 8
// on a DGX A100 launches eight kernels a call, 8 × (5.2 µs + 0.3 µs a
// channel) (net.MeasuredHost), which binds a 1 MiB all-reduce (NCCL runs
// it on 24 channels in ~36 µs) and not a 1 GiB one; torch.distributed's
// issue interval (net.MeasuredHost's) + 0.3 µs a channel binds a call
// shorter than it, such as 2 KiB between two GPUs; the device mode is the
// collective alone.
func TestIssueModesBoundACallByItsHost(t *testing.T) {
	sizes := `"sizes_bytes":[1048576,1073741824]`
	run := func(extra string) []collective.SummaryRow {
		return table[collective.SummaryRow](t, runSpec(t, `{"kind":"collective","cluster":{"preset":"dgx-a100","nodes":1},`+sizes+extra+`}`), "summary")
	}
	host, ok := net.MeasuredHost("dgx-a100", net.IssueTorch)
	require.True(t, ok)
	dev := run("")
	tests := run(`,"issue":"nccl_tests","gpus_per_thread":8`)
	torch := run(`,"issue":"torch"`)
	for i := range dev {
		require.Equal(t, "device", dev[i].Issue)
		require.Zero(t, dev[i].HostFloorS)
		require.Equal(t, dev[i].DeviceTimeS, dev[i].TimeS)
		// The issue mode leaves the device's time alone.
		require.InEpsilon(t, dev[i].DeviceTimeS, tests[i].DeviceTimeS, 1e-12)
		require.InEpsilon(t, dev[i].DeviceTimeS, torch[i].DeviceTimeS, 1e-12)
		ch := float64(tests[i].NCCLChannels)
		require.InDelta(t, 8*(5.2e-6+0.3e-6*ch), tests[i].HostFloorS, 1e-12)
		require.InDelta(t, host.TorchIssueS+0.3e-6*ch, torch[i].HostFloorS, 1e-12)
		for _, r := range []collective.SummaryRow{tests[i], torch[i]} {
			require.Equal(t, max(r.DeviceTimeS, r.HostFloorS), r.TimeS)
			require.InEpsilon(t, r.SizeBytes/r.TimeS, r.AlgbwBytesPerS, 1e-12)
		}
	}
	require.Equal(t, 24, tests[0].NCCLChannels)
	require.Greater(t, tests[0].HostFloorS, 2*tests[0].DeviceTimeS, "1 MiB: the launches bind")
	pair := table[collective.SummaryRow](t, runSpec(t, `{"kind":"collective","cluster":{"preset":"dgx-a100","nodes":1},"group":[0,1],"sizes_bytes":[2048],"issue":"torch"}`), "summary")
	require.Greater(t, pair[0].HostFloorS, pair[0].DeviceTimeS, "2 KiB on 2 GPUs: the issue interval binds")
	require.Equal(t, pair[0].HostFloorS, pair[0].TimeS)
	require.Equal(t, tests[1].DeviceTimeS, tests[1].TimeS, "1 GiB: the device binds")
	// One process per GPU (mpirun's nccl-tests) launches one kernel a call.
	one := run(`,"issue":"nccl_tests"`)
	require.InDelta(t, 5.2e-6+0.3e-6*24, one[0].HostFloorS, 1e-12)
	// Given host figures replace the preset's.
	own := run(`,"issue":"torch","host":{"torch_issue_s":1e-4}`)
	require.InDelta(t, 1e-4, own[0].HostFloorS, 1e-12)
}

func TestIssueSpecErrorsNameFields(t *testing.T) {
	for _, c := range []struct{ js, path, msg string }{
		{`"cluster":{"preset":"dgx-a100"},"issue":"mpi"`, "issue", `"device"`},
		{`"cluster":{"preset":"dgx-a100"},"algorithms":["nccl"],"nccl_version":"2.17"`, "nccl_version", "must be 2.18 or later"},
		{`"cluster":{"preset":"dgx-a100"},"algorithms":["nccl"],"nccl_version":"latest"`, "nccl_version", `such as "2.19"`},
		{`"cluster":{"preset":"dgx-a100"},"algorithms":["ring"],"nccl_version":"2.19"`, "nccl_version", `applies to algorithm "nccl"`},
		{`"cluster":{"preset":"dgx-a100"},"gpus_per_thread":8`, "gpus_per_thread", `applies to issue "nccl_tests" only`},
		{`"cluster":{"preset":"dgx-a100"},"host":{"launch_s":1e-6}`, "host", `applies to issue "torch" or "nccl_tests" only`},
		{`"cluster":{"preset":"dgx-a100"},"issue":"nccl_tests","gpus_per_thread":2000`, "gpus_per_thread", "1024"},
		{`"cluster":{"preset":"dgx-a100"},"issue":"torch","concurrent":2`, "concurrent", "must be 1"},
		{`"cluster":{"preset":"dgx-a100"},"issue":"torch","host":{"torch_issue_s":-1}`, "host.torch_issue_s", ""},
		// No nccl-tests sweep was measured on a DGX H100, no host on a
		// hand-built cluster.
		{`"cluster":{"preset":"dgx-h100"},"issue":"nccl_tests"`, "host", "no measured host figures for issue \"nccl_tests\" (measured on the presets [dgx-a100])"},
		{`"cluster":{"topology":"fully_connected","gpus":4},"issue":"torch"`, "host", "dgx-a100"},
	} {
		_, _, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(`{"kind":"collective",`+c.js+`}`))
		var se *spec.Error
		require.ErrorAs(t, err, &se, c.js)
		found := false
		for _, p := range se.Problems {
			if p.Path == c.path {
				require.Contains(t, p.Message, c.msg, c.js)
				found = true
			}
		}
		require.True(t, found, "%s: no problem at %s in %v", c.js, c.path, err)
	}
}
