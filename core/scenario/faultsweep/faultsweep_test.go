package faultsweep_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/eidolon-sim/eidolon/core/scenario/faultsweep"
	"github.com/eidolon-sim/eidolon/core/scenario/inference"
	"github.com/eidolon-sim/eidolon/core/scenario/training"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type tables struct {
	samples []faultsweep.SampleRow
	links   []faultsweep.LinkRow
	summary faultsweep.SummaryRow
	cables  []faultsweep.CableRow
}

func sweep(t testing.TB, js string) tables {
	_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
	require.NoError(t, err, js)
	require.Len(t, res.Tables, 4)
	return tables{res.Tables[0].Rows.([]faultsweep.SampleRow), res.Tables[1].Rows.([]faultsweep.LinkRow),
		res.Tables[2].Rows.([]faultsweep.SummaryRow)[0], res.Tables[3].Rows.([]faultsweep.CableRow)}
}

// smallTraining is a 4-layer GPT-22B over two DGX A100 nodes: TP 8 inside
// a node, DP 2 across the fabric.
const smallTraining = `{"model":{"preset":"gpt-22b","layers":4},"gpu":"a100-80gb-sxm",
	"cluster":{"preset":"dgx-a100","nodes":2},"parallel":{"tp":8,"dp":2,"global_batch":4},"seq_len":1024,
	"timeline_ranks":[-1]%s}`

func trainingSweep(extra, faults string) string {
	return fmt.Sprintf(`{"kind":"fault_sweep","seed":7,"training":`+smallTraining+`%s}`, faults, extra)
}

// A cable no route uses changes nothing: TP 8 inside each node and DP 2
// between the two nodes over rails (GPU i of both nodes meet at leaf i), so
// the leaf-to-spine cables carry nothing.
func TestDegradedLinkOnNoRouteChangesNothing(t *testing.T) {
	out := sweep(t, trainingSweep(`,"mode":"single_link","links":"fabric","degraded_health":0.25`, ""))
	idle, busy := 0, 0
	for _, l := range out.links {
		require.NotNil(t, l.DegradedSlowdown, l.Src)
		if l.HealthyBytes > 0 {
			busy++
			continue
		}
		idle++
		assert.Equal(t, [2]string{"switch", "switch"}, [2]string{l.SrcKind, l.DstKind}, l.Src)
		assert.Equal(t, 1.0, *l.DegradedSlowdown, "%s<->%s", l.Src, l.Dst)
		require.NotNil(t, l.FailedSlowdown, l.Src)
		assert.Equal(t, 1.0, *l.FailedSlowdown, "%s<->%s", l.Src, l.Dst)
	}
	assert.Positive(t, idle)
	assert.Equal(t, 16, busy, "the NIC-to-leaf cables of 16 GPUs")
	// The cables table is the whole cluster: 16 GPU-NVSwitch and 16
	// GPU-NIC cables in the nodes, the fabric ones eligible.
	eligible := 0
	for _, c := range out.cables {
		if c.Eligible {
			eligible++
			assert.Equal(t, "fabric", c.Scope)
		}
	}
	assert.Equal(t, out.summary.EligibleCables, eligible)
	assert.Len(t, out.cables, eligible+32)
}

// A degraded cable on the ring of a bandwidth-bound all-reduce slows it as
// the ring's slowest link predicts.
func TestDegradedBottleneckSlowsRingAllReduce(t *testing.T) {
	// Ring of n = 8 GPUs, B = 100 GB/s per direction, α = 1 µs per hop;
	// ring all-reduce of S = 1 GiB over ranks in ring order: 2(n−1) steps,
	// each sending S/n to the next rank over one link, all links at once.
	// Healthy: T1 = 2(n−1)/n · S/B + 2(n−1)·α.
	// One cable at health h: every step waits for the chunk on the slow
	// link (steps are lock-stepped by the data dependencies), so
	// Th = 2(n−1)/n · S/(h·B) + 2(n−1)·α; slowdown = Th / T1.
	const (
		n     = 8.0
		S     = float64(1 << 30)
		B     = 100e9
		alpha = 1e-6
		h     = 0.4
	)
	t1 := 2*(n-1)/n*S/B + 2*(n-1)*alpha
	th := 2*(n-1)/n*S/(h*B) + 2*(n-1)*alpha
	js := fmt.Sprintf(`{"kind":"fault_sweep","collective":{"cluster":{"topology":"ring","gpus":8,
		"bandwidth_bytes_per_s":%g,"latency_s":%g},"collective":"all_reduce","algorithms":["ring"],"sizes_bytes":[%g]},
		"mode":"single_link","single_link_faults":"degrade","degraded_health":%g}`, B, alpha, S, h)
	out := sweep(t, js)
	require.Len(t, out.links, 8, "every ring cable")
	assert.InEpsilon(t, t1, out.summary.HealthyStepTimeS, 0.01)
	for _, l := range out.links {
		require.NotNil(t, l.DegradedSlowdown, l.Src)
		assert.InEpsilon(t, th/t1, *l.DegradedSlowdown, 0.01, "%s<->%s", l.Src, l.Dst)
	}
	for _, r := range out.samples {
		assert.InEpsilon(t, th, *r.StepTimeS, 0.01, r.Faults)
	}
}

// Failing the cable from a GPU to its only NIC cuts that GPU off from its
// data-parallel peer on the other node: the sample fails and says why; the
// sweep goes on.
func TestPartitionIsAFailedSample(t *testing.T) {
	out := sweep(t, trainingSweep(`,"mode":"single_link","links":"node","cables":6`, ""))
	require.Len(t, out.samples, 12)
	var cut *faultsweep.SampleRow
	for i, r := range out.samples {
		if r.Failed {
			cut = &out.samples[i]
			assert.Nil(t, r.StepTimeS)
			assert.Nil(t, r.Slowdown)
		}
	}
	require.NotNil(t, cut, "some GPU cable failure must partition")
	assert.Contains(t, cut.Reason, "partitioned")
	assert.Equal(t, 1, cut.LinkFailures)
	assert.Greater(t, out.summary.FailedShare, 0.0)
	assert.Less(t, out.summary.FailedShare, 1.0, "degraded samples still run")
	for _, l := range out.links {
		if l.FailedSlowdown == nil {
			assert.Contains(t, l.FailedReason, "partitioned", l.Src)
		}
	}
}

// The same seed gives the same samples and results; another seed other samples.
func TestDeterminism(t *testing.T) {
	js := func(seed int) string {
		return fmt.Sprintf(`{"kind":"fault_sweep","seed":%d,"training":`+fmt.Sprintf(smallTraining, "")+
			`,"samples":4,"link_degradations":2,"stragglers":1,"degraded_health":0.3}`, seed)
	}
	a, b, c := sweep(t, js(3)), sweep(t, js(3)), sweep(t, js(4))
	require.Equal(t, a, b)
	faults := func(x tables) []string {
		var f []string
		for _, r := range x.samples {
			f = append(f, r.Faults)
		}
		return f
	}
	assert.NotEqual(t, faults(a), faults(c))
	// A longer sweep extends a shorter one: sample i depends on (seed, i).
	long := sweep(t, `{"kind":"fault_sweep","seed":3,"training":`+fmt.Sprintf(smallTraining, "")+
		`,"samples":5,"link_degradations":2,"stragglers":1,"degraded_health":0.3}`)
	assert.Equal(t, a.samples, long.samples[:4])
}

// Reusing the plan, costs and topology across samples gives what a fresh
// training run with the same faults gives.
func TestSampleMatchesStandaloneRun(t *testing.T) {
	out := sweep(t, trainingSweep(`,"samples":3,"link_degradations":1,"nic_failures":0,"stragglers":1,"links":"fabric","degraded_health":0.2`, ""))
	for _, r := range out.samples {
		require.False(t, r.Failed, r.Reason)
		// rebuild the fault list the row describes
		var links, strag []string
		var src, dst, dev string
		var h, sl float64
		for _, part := range splitFaults(r.Faults) {
			if n, _ := fmt.Sscanf(part, "%s health %g", &src, &h); n == 2 {
				ends := splitCable(src)
				src, dst = ends[0], ends[1]
				links = append(links, fmt.Sprintf(`{"src":%q,"dst":%q,"health":%g,"both_directions":true}`, src, dst, h))
			} else if n, _ := fmt.Sscanf(part, "%s slowdown %g", &dev, &sl); n == 2 {
				strag = append(strag, fmt.Sprintf(`{"device":%q,"slowdown":%g}`, dev, sl))
			}
		}
		require.Len(t, links, 1)
		require.Len(t, strag, 1)
		js := `{"kind":"training","model":{"preset":"gpt-22b","layers":4},"gpu":"a100-80gb-sxm",
			"cluster":{"preset":"dgx-a100","nodes":2},"parallel":{"tp":8,"dp":2,"global_batch":4},"seq_len":1024,
			"timeline_ranks":[-1],"faults":{"links":[` + links[0] + `],"stragglers":[` + strag[0] + `]}}`
		_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
		require.NoError(t, err)
		alone := res.Tables[0].Rows.([]training.SummaryRow)[0].StepTimeS
		assert.Equal(t, alone, *r.StepTimeS, r.Faults)
		assert.Greater(t, *r.Slowdown, 1.0, "a straggler at 1.5x slows the step: %s", r.Faults)
	}
}

func TestSummaryPercentiles(t *testing.T) {
	out := sweep(t, trainingSweep(`,"mode":"single_link","links":"fabric","single_link_faults":"degrade","degraded_health":0.05`, ""))
	var ran []float64
	for _, r := range out.samples {
		require.False(t, r.Failed)
		ran = append(ran, *r.Slowdown)
	}
	s := out.summary
	assert.Equal(t, "training", s.Base)
	assert.Equal(t, len(out.samples), s.Samples)
	assert.LessOrEqual(t, *s.SlowdownP50, *s.SlowdownP90)
	assert.LessOrEqual(t, *s.SlowdownP90, *s.SlowdownP99)
	assert.LessOrEqual(t, *s.SlowdownP99, *s.SlowdownMax)
	assert.Greater(t, *s.SlowdownMax, 1.0, "a NIC cable at 5%% on the data-parallel path slows the step")
}

func TestSpecErrors(t *testing.T) {
	for js, path := range map[string]string{
		`{"kind":"fault_sweep","samples":3,"link_failures":1}`:                                                            "needs exactly one base run",
		trainingSweep(`,"mode":"random"`, ""):                                                                             "mode",
		trainingSweep(`,"link_failures":1,"degraded_health":2`, ""):                                                       "degraded_health",
		trainingSweep(`,"samples":2`, ""):                                                                                 "at least one fault",
		trainingSweep(`,"link_failures":1`, `,"parallel":{"tp":3}`):                                                       "training.parallel",
		`{"kind":"fault_sweep","training":{"kind":"inference"},"link_failures":1}`:                                        "training.kind",
		trainingSweep(`,"samples":1,"link_failures":1`, `,"faults":{"stragglers":[{"device":"n9.gpu0","slowdown":2}]}`):   "training.faults.stragglers[0].device",
		trainingSweep(`,"samples":1,"nic_failures":17`, ""):                                                               "nic_failures",
		`{"kind":"fault_sweep","collective":{"cluster":{"topology":"ring","gpus":4},"sizes_bytes":[1,2]},"stragglers":1}`: "collective.sizes_bytes",
		// One rank's collective takes no time: nothing to slow down.
		`{"kind":"fault_sweep","collective":{"cluster":{"topology":"ring","gpus":4},"group":[2]},"mode":"single_link"}`:  "collective.group: a fault sweep needs a communicator of at least 2 ranks",
		`{"kind":"fault_sweep","collective":{"cluster":{"topology":"ring","gpus":4},"groups":[[0],[3]]},"stragglers":1}`: "collective.groups: a fault sweep needs",
		// A field the mode does not read is refused, not ignored.
		trainingSweep(`,"mode":"single_link","stragglers":2`, ""):        `stragglers: applies to mode "sample"`,
		trainingSweep(`,"link_failures":1,"cables":4`, ""):               `cables: applies to mode "single_link"`,
		trainingSweep(`,"stragglers":1,"single_link_faults":"fail"`, ""): `single_link_faults: applies to mode "single_link"`,
		trainingSweep(`,"stragglers":1`, `,"max_events":1e6`):            "training.max_events: set it on the fault sweep itself",
		trainingSweep(`,"mode":"single_link","samples":-1`, ""):          "samples: must be",
	} {
		_, _, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
		var se *spec.Error
		require.True(t, errors.As(err, &se), "%s: %v", js, err)
		assert.Contains(t, err.Error(), path)
		verr := all.Validate([]byte(js), 0)
		require.Error(t, verr, js)
		assert.Contains(t, verr.Error(), path)
	}
}

// Cancellation between samples ends the sweep with the context's error.
func TestCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	env := scenario.Env{Ctx: ctx, Progress: func(f float64) {
		calls++
		if calls == 2 {
			cancel()
		}
	}}
	_, _, err := all.Run(env, []byte(trainingSweep(`,"samples":5,"link_degradations":1`, "")))
	require.ErrorIs(t, err, context.Canceled)
}

func splitFaults(s string) []string { return strings.Split(s, "; ") }
func splitCable(s string) []string  { return strings.SplitN(s, "<->", 2) }

// Shards split a sweep: together they hold the whole sweep's samples and
// links rows, numbered as in the whole sweep.
func TestShardsPartitionTheSweep(t *testing.T) {
	for _, mode := range []string{`"samples":5,"link_degradations":1,"link_failures":1`, `"mode":"single_link","links":"fabric","cables":5`} {
		whole := sweep(t, trainingSweep(","+mode, ""))
		var samples []faultsweep.SampleRow
		var links []faultsweep.LinkRow
		for shard := 0; shard < 2; shard++ {
			part := sweep(t, trainingSweep(fmt.Sprintf(`,%s,"shards":2,"shard":%d`, mode, shard), ""))
			samples = append(samples, part.samples...)
			links = append(links, part.links...)
			assert.Equal(t, whole.summary.HealthyStepTimeS, part.summary.HealthyStepTimeS)
		}
		sort.Slice(samples, func(i, j int) bool { return samples[i].Sample < samples[j].Sample })
		sort.Slice(links, func(i, j int) bool { return links[i].Link < links[j].Link })
		assert.Equal(t, whole.samples, samples, mode)
		assert.ElementsMatch(t, whole.links, links, mode)
	}
}

// A failed cable reroutes only some replicas: the sweep simulates those on
// their own and mirrors the rest (exec.Options.HealthyRoute); every replica
// simulated gives the same step.
func TestRerouteMirroringMatchesFullSimulation(t *testing.T) {
	base := `{"model":{"preset":"gpt-22b","layers":2},"gpu":"a100-80gb-sxm",
		"cluster":{"preset":"dgx-a100","nodes":4},"parallel":{"tp":8,"pp":2,"dp":2,"global_batch":8},"seq_len":1024,
		"timeline_ranks":[-1]%s}`
	out := sweep(t, `{"kind":"fault_sweep","seed":2,"training":`+fmt.Sprintf(base, "")+
		`,"mode":"single_link","links":"node","single_link_faults":"fail","cables":8}`)
	ran := 0
	for _, r := range out.samples {
		if r.Failed {
			continue
		}
		ran++
		ends := splitCable(strings.TrimSuffix(r.Faults, " failed"))
		full := fmt.Sprintf(`,"full_simulation":true,"faults":{"links":[{"src":%q,"dst":%q,"health":0,"both_directions":true}]}`, ends[0], ends[1])
		_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(`{"kind":"training",`+fmt.Sprintf(base, full)[1:]))
		require.NoError(t, err)
		s := res.Tables[0].Rows.([]training.SummaryRow)[0]
		assert.InEpsilon(t, s.StepTimeS, *r.StepTimeS, 1e-9, r.Faults)
	}
	assert.Positive(t, ran, "GPU-NVSwitch failures reroute through the NICs")
}

// An inference base: the sample's time is the batch end to end, as the
// inference kind reports it with the same fault.
func TestInferenceBase(t *testing.T) {
	base := `{"model":"llama2-7b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":2},
		"tp":8,"pp":2,"batch":4,"prompt_tokens":256,"output_tokens":4,"timeline_ranks":[-1]%s}`
	out := sweep(t, `{"kind":"fault_sweep","seed":3,"inference":`+fmt.Sprintf(base, "")+
		`,"samples":3,"link_degradations":1,"links":"fabric","degraded_health":0.1}`)
	assert.Equal(t, "inference", out.summary.Base)
	for _, r := range out.samples {
		require.False(t, r.Failed, r.Reason)
		ends := splitCable(strings.TrimSuffix(r.Faults, " health 0.1"))
		f := fmt.Sprintf(`,"faults":{"links":[{"src":%q,"dst":%q,"health":0.1,"both_directions":true}]}`, ends[0], ends[1])
		_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(`{"kind":"inference",`+fmt.Sprintf(base, f)[1:]))
		require.NoError(t, err)
		assert.Equal(t, res.Tables[0].Rows.([]inference.SummaryRow)[0].E2ES, *r.StepTimeS, r.Faults)
		assert.GreaterOrEqual(t, *r.Slowdown, 1.0, r.Faults)
	}
}

// On GPUs sharing a NIC behind a PCIe switch every cable inside a node is
// both its directions, and a sample's description, replayed as a fault
// spec with both_directions, gives the sample's step.
func TestSharedNICCablesReplay(t *testing.T) {
	base := `{"model":{"preset":"llama2-7b","layers":2},"gpu":"a100-40gb","cluster":{"preset":"aws-p4d","nodes":2},
		"parallel":{"tp":1,"pp":2,"dp":8,"global_batch":8},"seq_len":512,"timeline_ranks":[-1]%s}`
	out := sweep(t, fmt.Sprintf(`{"kind":"fault_sweep","seed":3,"training":`+base+`,"mode":"single_link","links":"node","single_link_faults":"degrade","degraded_health":0.3}`, ""))
	require.NotEmpty(t, out.samples)
	for i, r := range out.samples {
		require.Contains(t, r.Faults, "<->", "a cable inside a node has both directions")
		if i%7 != 0 {
			continue
		}
		ends := splitCable(strings.TrimSuffix(r.Faults, " health 0.3"))
		faults := fmt.Sprintf(`,"faults":{"links":[{"src":%q,"dst":%q,"health":0.3,"both_directions":true}]}`, ends[0], ends[1])
		_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(`{"kind":"training",`+fmt.Sprintf(base, faults)[1:]))
		require.NoError(t, err, r.Faults)
		assert.Equal(t, res.Tables[0].Rows.([]training.SummaryRow)[0].StepTimeS, *r.StepTimeS, r.Faults)
	}
}
