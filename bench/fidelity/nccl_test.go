package fidelity

import (
	"context"
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/net"
)

// collData is the groups load reads from the kernel tables (CollGroups:
// the all-reduces; SendRecvGroups) and their simulated rows.
func collData(t *testing.T, load func(dir string) ([]CollGroup, error)) ([]CollGroup, []CollRow) {
	t.Helper()
	dir := KernelsDir()
	if dir == "" {
		t.Skip("reference kernel tables not found (../shared/reference/kernels or /work/shared/reference/kernels)")
	}
	groups, err := load(dir)
	require.NoError(t, err)
	rows, err := Simulate(context.Background(), groups)
	require.NoError(t, err)
	return groups, rows
}

// TestCollectivesReport regenerates COLLECTIVES.md with -update and fails
// when the committed file is stale.
// Run: go test ./bench/fidelity -run TestCollectivesReport [-update]
func TestCollectivesReport(t *testing.T) {
	groups, rows := collData(t, CollGroups)
	p2p, p2pRows := collData(t, SendRecvGroups)
	doc := CollectivesReport(groups, rows) + SendRecvReport(p2p, p2pRows)
	if *update {
		require.NoError(t, os.WriteFile("COLLECTIVES.md", []byte(doc), 0o644))
		return
	}
	old, err := os.ReadFile("COLLECTIVES.md")
	require.NoError(t, err)
	require.Equal(t, doc, string(old), "COLLECTIVES.md is stale: go test ./bench/fidelity -run TestCollectivesReport -update")
}

// TestNCCLFitIsOptimal: the generations' fitted figures (core/net) and the
// hosts' (Hosts) are what the fits find on the training split.
// Run with -v to see the optimum.
func TestNCCLFitIsOptimal(t *testing.T) {
	groups, rows := collData(t, CollGroups)
	for _, gen := range []string{"ampere", "hopper"} {
		p, score, err := FitGeneration(gen, groups)
		require.NoError(t, err)
		t.Logf("%s: %+v (mean over groups of mean |error| %.4f)", gen, p, score)
		g, _ := net.NCCLGenerationByName(gen)
		require.Equal(t, p, NCCLParamsOf(g), "core/net NCCLGenerations %s: refit", gen)
	}
	for h, hp := range Hosts {
		got := FitHost(rows, groups, h)
		t.Logf("%s: torch_issue_s %.1f µs, launch_s %.1f µs, channel_s %.2f µs", h, got.TorchIssueS*1e6, got.LaunchS*1e6, got.ChannelS*1e6)
		require.InDelta(t, got.TorchIssueS, hp.TorchIssueS, 1e-12, h)
		require.InDelta(t, got.LaunchS, hp.LaunchS, 1e-12, h)
		require.InDelta(t, got.ChannelS, hp.ChannelS, 1e-12, h)
	}
}

// TestCollectivesWithin10 holds every required group to 10 % over the size
// ranges where a deterministic model can be (Within10), and names what it
// cannot (skipped subtests carry the reason and the numbers).
func TestCollectivesWithin10(t *testing.T) {
	groups, rows := collData(t, CollGroups)
	seen := map[string]bool{}
	for _, w := range Within10 {
		seen[w.Group] = true
		t.Run(w.Group, func(t *testing.T) {
			n := 0
			for _, r := range rows {
				if r.Group == w.Group && r.SizeBytes >= w.Lo && r.SizeBytes <= w.Hi {
					n++
					require.InDelta(t, 0, r.ErrorPct, 10, "%s at %.0f bytes: measured %.1f µs, simulated %.1f µs", w.Group, r.SizeBytes, r.MedianS*1e6, r.SimulatedS*1e6)
				}
			}
			require.GreaterOrEqual(t, n, 3, "the range must hold measured sizes")
		})
		t.Run(w.Group+"/rest", func(t *testing.T) { t.Skip(w.Rest) })
	}
	for _, g := range groups {
		if g.Required {
			require.True(t, seen[g.Name], "required group %s has no Within10 entry", g.Name)
		}
	}
}

// GeoMeanErrPct: 10 % fast and 10 % slow in ratio read 10 %, and an exact
// point pulls the mean down instead of zeroing it.
func TestGeoMeanErrPct(t *testing.T) {
	rows := []CollRow{{MedianS: 1, SimulatedS: 1.1}, {MedianS: 1.1, SimulatedS: 1}}
	require.InDelta(t, 10, GeoMeanErrPct(rows), 1e-9)
	rows = append(rows, CollRow{MedianS: 2, SimulatedS: 2})
	require.InDelta(t, 100*(math.Pow(1.1, 2.0/3)-1), GeoMeanErrPct(rows), 1e-9)
	require.True(t, math.IsNaN(GeoMeanErrPct(nil)))
}

// TestSendRecvWithin10 holds the pipeline's transfer (send_recv "nccl")
// to 10 % of Vidur's send kernel times where the measurement is the
// transfer itself: inside a DGX H100 node from 5.9 MB up, inside a DGX A100
// node once the buffer outgrows the 40 MB L2 (COLLECTIVES.md says what the
// smaller sizes show).
func TestSendRecvWithin10(t *testing.T) {
	_, rows := collData(t, SendRecvGroups)
	for _, w := range []struct {
		group  string
		lo, hi float64
	}{{"h100_dgx send/recv 2/2", 5931008, 67108864}, {"a100_dgx send/recv 2/2", 36569088, 67108864}} {
		n := 0
		for _, r := range rows {
			if r.Group == w.group && r.SizeBytes >= w.lo && r.SizeBytes <= w.hi {
				n++
				require.InDelta(t, 0, r.ErrorPct, 10, "%s at %.0f bytes: measured %.1f µs, simulated %.1f µs", w.group, r.SizeBytes, r.MedianS*1e6, r.SimulatedS*1e6)
			}
		}
		require.GreaterOrEqual(t, n, 8, "%s: the range must hold measured sizes", w.group)
	}
}

// DeviceAboveMin keeps a group's sizes whose simulated device time is more
// than the timer's step above the fastest measured call, and no others.
func TestDeviceAboveMin(t *testing.T) {
	rows := []CollRow{
		{Group: "g", SizeBytes: 1, MinS: 10e-6, NCCLS: 12e-6},   // 2 µs above: kept
		{Group: "g", SizeBytes: 2, MinS: 10e-6, NCCLS: 10.9e-6}, // within the 1 µs step
		{Group: "g", SizeBytes: 3, MinS: 10e-6, NCCLS: 9e-6},    // below
		{Group: "h", SizeBytes: 4, MinS: 10e-6, NCCLS: 20e-6},   // another group
		{Group: "g", SizeBytes: 5, MinS: 0, NCCLS: 20e-6},       // no minimum measured
	}
	above := DeviceAboveMin(rows, "g")
	require.Len(t, above, 1)
	require.Equal(t, 1.0, above[0].SizeBytes)
}
