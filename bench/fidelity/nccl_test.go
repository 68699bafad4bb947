package fidelity

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/net"
)

func collData(t *testing.T) ([]CollGroup, []CollRow) {
	t.Helper()
	dir := KernelsDir()
	if dir == "" {
		t.Skip("reference kernel tables not found (../shared/reference/kernels or /work/shared/reference/kernels)")
	}
	groups, err := CollGroups(dir)
	require.NoError(t, err)
	rows, err := Simulate(context.Background(), groups)
	require.NoError(t, err)
	return groups, rows
}

// TestCollectivesReport regenerates COLLECTIVES.md with -update and fails
// when the committed file is stale.
// Run: go test ./bench/fidelity -run TestCollectivesReport [-update]
func TestCollectivesReport(t *testing.T) {
	groups, rows := collData(t)
	doc := CollectivesReport(groups, rows)
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
	groups, rows := collData(t)
	for _, gen := range []string{"ampere", "hopper"} {
		p, score, err := FitGeneration(gen, groups)
		require.NoError(t, err)
		t.Logf("%s: %+v (mean over groups of mean |error| %.4f)", gen, p, score)
		g, _ := net.NCCLGenerationByName(gen)
		require.Equal(t, p, ParamsOf(g), "core/net NCCLGenerations %s: refit", gen)
	}
	for h, hp := range Hosts {
		issue := FitHost(rows, groups, h, KernelTime)
		launch := FitHost(rows, groups, h, HostTimedG8)
		t.Logf("%s: IssueS %.1f µs, LaunchS %.1f µs", h, issue*1e6, launch*1e6)
		require.InDelta(t, issue, hp.IssueS, 1e-12, h)
		require.InDelta(t, launch, hp.LaunchS, 1e-12, h)
	}
}

// within10 are, per required group, the size ranges (bytes, inclusive)
// where every simulated size is within 10 % of the measured median, and
// why the rest is not; TestCollectivesWithin10 asserts the first and
// names the second.
var within10 = []struct {
	group  string
	lo, hi float64
	rest   string
}{
	{"a100_dgx 8/8", 2293760, 67108864, "below 2.2 MiB the kernel time is the host's issue interval, bimodal (see Bimodal: medians 25–65 µs with no trend up to 1 MiB), and 1–2 MiB sits at the upper mode (64–72 µs) where NCCL's LL is priced at 36–57 µs"},
	{"a100_dgx 4/4", 6455296, 61603840, "host-bound bimodal below 1.5 MiB; LL128 at 2.7–5.9 MiB is 10–14 % fast (its memory bound is fitted on 8 GPUs); 64 MiB is 10.1 % fast"},
	{"a100_dgx 2/2", 5439488, 67108864, "host-bound bimodal below 1 MiB (10–66 µs); 1–5 MiB Simple is 10–17 % slow (its base latency is shared with 8-GPU rings)"},
	{"h100_dgx 8/8", 14123008, 61603840, "host-bound below 512 KiB (19–40 µs bimodal); NVLS at 6.5–13 MiB is 11–12 % fast and 64 MiB 10.6 % slow (the measured bus bandwidth jumps from 321 to 365 GB/s between 52 and 64 MiB)"},
	{"h100_dgx 4/4", 7700480, 67108864, "host-bound bimodal below 1 MiB (15–52 µs); NVLS at 5–7 MiB is 14–17 % slow"},
	{"h100_dgx 2/2", 5931008, 67108864, "host-bound below 6 MiB: medians jump between 27 and 45 µs up to 5 MiB (7–44 µs over all small sizes)"},
	{"a100_pairwise_nvlink 2/2", 47448064, 413718530, "host-bound bimodal below 1 MiB (7–68 µs); 4–40 MiB Simple is 11–33 % slow: this VM's PCIe A100s reach ~200 GB/s where the DGX's 2-GPU rings reach 170–187 (one Ampere memory figure serves both)"},
	{"a100_pairwise_nvlink 4/4", 2293760, 536373250, "host-bound bimodal below 1 MiB (24–120 µs)"},
	{"h100_pairwise_nvlink 2/2", 1933312, 14123008, "below 2 MiB medians alternate 7–31 µs; above 14 MiB the VM's bridge reaches ~190 GB/s against NCCL's 240 GB/s graph (10–18 % fast)"},
	{"h100_pairwise_nvlink 4/4", 2719744, 67108864, "below 2.6 MiB the medians alternate (12–77 µs) and LL over PCIe is 11–18 % fast"},
	{"nccl-tests 8×A100", 268435456, 17179869184, "1–4 MiB is flat at 101 µs (the model's LL/LL128 give 57–96 µs), 8 MiB is 13 % slow, 128 MiB 13 % fast (busbw dips to 177 GB/s between 64 MiB and 256 MiB)"},
}

// TestCollectivesWithin10 holds every required group to 10 % over the size
// ranges where a deterministic model can be (within10), and names what it
// cannot (skipped subtests carry the reason and the numbers).
func TestCollectivesWithin10(t *testing.T) {
	groups, rows := collData(t)
	seen := map[string]bool{}
	for _, w := range within10 {
		seen[w.group] = true
		t.Run(w.group, func(t *testing.T) {
			n := 0
			for _, r := range rows {
				if r.Group == w.group && r.SizeBytes >= w.lo && r.SizeBytes <= w.hi {
					n++
					require.InDelta(t, 0, r.ErrorPct, 10, "%s at %.0f bytes: measured %.1f µs, simulated %.1f µs", w.group, r.SizeBytes, r.MedianS*1e6, r.SimulatedS*1e6)
				}
			}
			require.GreaterOrEqual(t, n, 7, "the range must hold measured sizes")
		})
		t.Run(w.group+"/rest", func(t *testing.T) { t.Skip(w.rest) })
	}
	for _, g := range groups {
		if g.Required {
			require.True(t, seen[g.Name], "required group %s has no within10 entry", g.Name)
		}
	}
}
