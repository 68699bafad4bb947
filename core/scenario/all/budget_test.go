package all_test

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	servingscn "github.com/eidolon-sim/eidolon/core/scenario/serving"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/eidolon-sim/eidolon/core/table"
	"github.com/stretchr/testify/require"
)

// The budgets of the collective, operators and eidola kinds (every script
// source): a spec over the memory or the event limit is a SpecError naming
// the field the estimate grows with and the estimate; max_events and
// max_memory_bytes raise the limits.
func TestBudgetRefusesWithTheFields(t *testing.T) {
	const gib = 1 << 30
	for _, c := range []struct {
		js, path, what string
		limit          float64
	}{
		// a stepped ring over 32,768 GPUs, 8 channels: 1.7e10 transfers
		{`{"kind":"collective","cluster":{"preset":"dgx-h100","nodes":4096},"algorithms":["ring"],"sizes_bytes":[1e9]}`, "cluster", "events", 0},
		// a direct all-to-all keeps its 1.7e7 flows in flight: 31 GiB
		{`{"kind":"collective","cluster":{"preset":"dgx-h100","nodes":512},"collective":"all_to_all","sizes_bytes":[1e9]}`, "cluster", "GiB", 2 * gib},
		{`{"kind":"collective","cluster":{"preset":"dgx-a100","nodes":32},"algorithms":["ring"],"flows":true,"sizes_bytes":[1e6,1e9]}`, "cluster", "GiB", 0.25 * gib},
		{`{"kind":"operators","gpu":"h100-sxm","model":{"preset":"llama2-7b","layers":16384}}`, "model.layers", "GiB", 1 << 20},
		{`{"kind":"eidola","script_source":"generator","generator":{"interval_s":1e-6},"gemm":{"m":262144,"n":65536,"k":4096},"seeds":10}`, "gemm", "GiB", 2 * gib},
		{`{"kind":"eidola","script_source":"generator","generator":{"interval_s":1e-6},"gemm":{"m":262144,"n":65536,"k":4096},"seeds":10000}`, "gemm", "events", 0},
		{`{"kind":"eidola","kernel":"allreduce","script_source":"table","script":[{"time_s":0,"source_gpu":1,"chunk":0,"bytes":1}],"ghosts":7,"gemm":{"m":65536,"n":65536},"seeds":1000}`, "script", "GiB", 2 * gib},
		// the task-graph kinds count their events too
		{`{"kind":"fault_sweep","samples":1000000,"link_failures":1,"training":{"model":{"preset":"gpt-22b","layers":48},"gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":16},"parallel":{"tp":8,"pp":4,"global_batch":512}}}`, "samples", "events", 0},
		{`{"kind":"inference","model":"llama2-7b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},"output_tokens":64,"max_events":1000}`, "output_tokens", "events", 0},
		// every replica simulated, where mirroring would simulate one: a
		// failed spine switch and full_simulation over 1,024 replicas
		// (which exhausted the machine before they were counted)
		{`{"kind":"training","model":"gpt3-175b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":8192},"parallel":{"tp":8,"pp":8,"global_batch":98304},"seq_len":2048,"faults":{"devices":[{"device":"spine3"}]}}`, "parallel.global_batch", "GiB", 8 * gib},
		{`{"kind":"inference","model":"llama3-70b","gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":1024},"tp":8,"replicas":1024,"batch":8,"prompt_tokens":1000,"output_tokens":2000,"full_simulation":true}`, "output_tokens", "GiB", 8 * gib},
		// serving: a million requests a second for a million seconds, and
		// a closed loop as long
		{`{"kind":"serving","model":{"preset":"llama3-8b","layers":2},"gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},"workload":{"rate_per_s":1e4,"duration_s":1e4}}`, "workload.duration_s", "GiB", 8 * gib},
		{`{"kind":"serving","model":{"preset":"llama3-8b","layers":2},"gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},"workload":{"arrival":"closed_loop","concurrency":64,"duration_s":1e6}}`, "workload.duration_s", "GiB", 8 * gib},
		// a cluster that links every pair of its 10^5 GPUs (10^10 links,
		// which validation built before they were counted), and a torus
		// of 10^9 GPUs (whose budget listed every rank to count them)
		{`{"kind":"collective","cluster":{"topology":"fully_connected","gpus":100000},"sizes_bytes":[1e6]}`, "cluster", "GiB", 8 * gib},
		{`{"kind":"collective","cluster":{"topology":"torus","dims":[4096,4096,64]},"sizes_bytes":[1e6]}`, "cluster", "GiB", 8 * gib},
		{`{"kind":"training","model":{"preset":"gpt-22b","layers":2},"gpu":"a100-80gb-sxm","cluster":{"topology":"composed","nodes":64,"gpus_per_node":1024,"intra":"fully_connected"},"parallel":{"tp":8,"global_batch":8192}}`, "cluster", "GiB", 8 * gib},
		// synthetic data drawn in a latent space: the map from it to the
		// features, 8 TB here, which ran out of memory before it was
		// counted (grown-spec test, seed 436)
		{`{"kind":"seedflood","topology":{"kind":"ring","clients":4},"steps":3,"dataset":{"samples":60,"n_features":1000000,"latent_dim":1000000,"classes":2}}`, "dataset.latent_dim", "GiB", 2 * gib},
		// a minibatch's forward/backward buffers, 113 GB for 431,817 rows
		// of 65,536 classes, which ran out of memory before they were
		// counted (grown-spec test, seed 1463)
		{`{"kind":"seedflood","topology":{"kind":"ring","clients":4},"steps":3,"batch_size":431817,"methods":["seedflood","dsgd"],"dataset":{"samples":60,"n_features":3,"classes":65536}}`, "batch_size", "GiB", 2 * gib},
	} {
		_, _, err := all.Admit([]byte(c.js), c.limit)
		var se *spec.Error
		require.ErrorAs(t, err, &se, c.js)
		require.Equal(t, c.path, se.Problems[0].Path, c.js)
		msg := se.Problems[0].Message
		if c.what == "events" {
			require.Contains(t, msg, "the run would simulate about", c.js)
			require.Contains(t, msg, "raise max_events", c.js)
			// the spec's max_events lets it through
			js := strings.Replace(c.js[:len(c.js)-1], `,"max_events":1000`, "", 1) + `,"max_events":1e15}`
			_, _, err = all.Admit([]byte(js), c.limit)
			require.NoError(t, err, js)
		} else {
			require.Contains(t, msg, "the run would need about", c.js)
			require.Contains(t, msg, "raise max_memory_bytes", c.js)
			js := c.js[:len(c.js)-1] + `,"max_memory_bytes":1e15}`
			_, _, err = all.Admit([]byte(js), c.limit)
			require.NoError(t, err, js)
		}
		require.Contains(t, msg, "grows with "+c.path, c.js)
	}
	_, _, err := all.Admit([]byte(`{"kind":"selftest","max_events":-1}`), 0)
	require.ErrorContains(t, err, "max_events: must be > 0")
}

// The estimates are at most four times what the runs allocate (Go's
// TotalAlloc over the run: an upper bound of its peak) and hand over to
// Python (their tables' bundle, twice: spec.HandOverCopies), and not much
// below it (an estimate too low lets a run exhaust the machine), for a few
// sizes of each.
func TestBudgetEstimatesTheAllocation(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a few seconds of simulations")
	}
	for _, js := range []string{
		`{"kind":"collective","cluster":{"preset":"dgx-a100","nodes":2},"collective":"all_to_all","sizes_bytes":[1e9]}`,
		`{"kind":"collective","cluster":{"preset":"dgx-a100","nodes":16},"collective":"all_to_all","sizes_bytes":[1e9]}`,
		`{"kind":"collective","cluster":{"preset":"dgx-a100","nodes":2},"flows":true,"sizes_bytes":[1e9]}`,
		`{"kind":"collective","cluster":{"preset":"dgx-a100","nodes":8},"flows":true,"sizes_bytes":[1e9]}`,
		`{"kind":"collective","cluster":{"preset":"dgx-a100","nodes":32},"ring":"stream","sizes_bytes":[1e9]}`,
		`{"kind":"collective","cluster":{"topology":"fully_connected","gpus":512},"sizes_bytes":[1e9]}`,
		`{"kind":"operators","gpu":"h100-sxm","model":{"preset":"llama2-7b","layers":8}}`,
		`{"kind":"seedflood","topology":{"kind":"ring","clients":8},"steps":3,"methods":["seedflood","dsgd"],"dataset":{"samples":2000,"n_features":3000,"latent_dim":1500,"classes":4},"pretrain":{"kind":"source","steps":3}}`,
		`{"kind":"seedflood","topology":{"kind":"ring","clients":4},"steps":2,"batch_size":4096,"methods":["seedflood","dsgd"],"dataset":{"samples":200,"n_features":3,"classes":2048}}`,
		`{"kind":"operators","gpu":"h100-sxm","model":{"preset":"gpt-22b","layers":1024},"phase":"prefill"}`,
		`{"kind":"eidola","script_source":"generator","generator":{"interval_s":1e-6}}`,
		`{"kind":"eidola","script_source":"generator","generator":{"interval_s":1e-6},"ghosts":63,"gemm":{"m":16384,"n":8192,"k":4096}}`,
		`{"kind":"eidola","kernel":"allreduce","script_source":"generator","generator":{"interval_s":1e-6},"ghosts":31,"gemm":{"m":32768,"n":8192}}`,
		`{"kind":"eidola","kernel":"gemm_reducescatter","script_source":"generator","generator":{"interval_s":1e-6},"ghosts":15,"gemm":{"m":32768,"n":8192,"k":4096},"seeds":2}`,
		`{"kind":"eidola","script_source":"table","script":` + script(7, 1) + `,"gemm":{"m":16384,"n":8192,"k":4096}}`,
		`{"kind":"serving","model":{"preset":"llama3-8b","layers":4},"gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},"workload":{"rate_per_s":20,"requests":20000}}`,
		`{"kind":"serving","model":"llama3-70b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},"tp":8,"workload":{"arrival":"closed_loop","concurrency":16,"requests":2000}}`,
		`{"kind":"training","model":{"preset":"gpt3-175b","layers":4},"gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":1},"parallel":{"tp":4,"global_batch":2048},"seq_len":2048}`,
		`{"kind":"training","model":{"preset":"gpt3-175b","layers":4},"gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":1},"parallel":{"tp":4,"global_batch":2048,"sequence_parallel":true,"tp_comm_overlap":true},"seq_len":2048}`,
		`{"kind":"training","model":{"preset":"gpt3-175b","layers":8},"gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":2},"parallel":{"tp":4,"pp":4,"global_batch":1024},"seq_len":2048}`,
		`{"kind":"training","model":{"preset":"mixtral-8x7b","layers":4},"gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":1},"parallel":{"tp":1,"ep":8,"global_batch":4096},"seq_len":2048}`,
		`{"kind":"training","model":{"preset":"mixtral-8x7b","layers":2},"gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":1},"parallel":{"tp":4,"ep":2,"global_batch":2048,"sequence_parallel":true,"tp_comm_overlap":true,"recompute":"selective"},"seq_len":8192,"dtype":"fp8"}`,
		`{"kind":"serving","model":{"preset":"llama3-8b","layers":2},"gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":1024},"workload":{"arrival":"closed_loop","concurrency":4,"requests":12,"prompt_tokens":{"tokens":300},"output_tokens":{"tokens":20}}}`,
		`{"kind":"serving","model":{"preset":"llama3-8b","layers":2},"gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":1024},"replicas":2,"disaggregation":{"prefill_replicas":1},"workload":{"arrival":"closed_loop","concurrency":4,"requests":12,"prompt_tokens":{"tokens":300},"output_tokens":{"tokens":20}}}`,
		`{"kind":"ssm_tp","model":"mamba-2.8b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1024},"tp_degrees":[1,2],"batch":2,"prompt_lengths":[256],"output_length":4}`,
		`{"kind":"parallel_search","model":{"preset":"gpt-22b","layers":4},"gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":2},"global_batch":512,"seq_len":1024,"tp":[2,4,8],"pp":[1,2],"micro_batch":[1,2]}`,
		`{"kind":"fault_sweep","seed":5,"samples":4,"link_failures":1,"training":{"model":{"preset":"gpt-22b","layers":4},"gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":2},"parallel":{"tp":8,"global_batch":512},"seq_len":1024,"timeline_ranks":[-1]}}`,
		`{"kind":"inference","model":"llama2-7b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},"tp":2,"batch":4,"prompt_tokens":128,"output_tokens":256}`,
		`{"kind":"inference","model":"llama2-7b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},"tp":2,"pp":2,"batch":4,"prompt_tokens":128,"output_tokens":1024}`,
		`{"kind":"inference","model":{"preset":"llama2-7b","layers":8},"gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},"tp":8,"batch":1,"prompt_tokens":128,"output_tokens":2048,"timeline_ranks":[-1]}`,
		`{"kind":"inference","model":{"preset":"llama2-7b","layers":8},"gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},"tp":2,"batch":4,"prompt_tokens":128,"output_tokens":8192}`,
		`{"kind":"inference","model":{"preset":"deepseek-v3","layers":8},"gpu":"h800","cluster":{"preset":"dgx-h800","nodes":2},"replicas":16,"ep":16,"two_batch_overlap":true,"batch":8,"prompt_tokens":128,"output_tokens":1024,"dtype":"fp8"}`,
		`{"kind":"inference","model":{"preset":"llama2-7b","layers":8},"gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},"tp":2,"replicas":2,"batch":4,"prompt_tokens":128,"output_tokens":2048,"faults":{"stragglers":[{"device":"n0.gpu1","slowdown":1.5}]}}`,
		// a straggler on every GPU: every replica simulated, 16 of them in the timeline
		`{"kind":"training","model":{"preset":"gpt-22b","layers":4},"gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":16},"parallel":{"tp":4,"global_batch":256},"seq_len":1024,"faults":{"sample":{"straggler_probability":1,"slowdown":1.2}}}`,
		// a timeline of every rank
		`{"kind":"training","model":{"preset":"gpt-22b","layers":4},"gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":2},"parallel":{"tp":2,"pp":2,"global_batch":256},"seq_len":1024,"timeline_ranks":[` + ranksList(16) + `]}`,
		// every replica simulated: full_simulation, or a failed link
		`{"kind":"training","model":{"preset":"gpt3-175b","layers":8},"gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":8},"parallel":{"tp":8,"pp":2,"global_batch":256,"sequence_parallel":true},"seq_len":2048,"full_simulation":true}`,
		`{"kind":"training","model":{"preset":"gpt3-175b","layers":8},"gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":8},"parallel":{"tp":8,"pp":2,"global_batch":256,"sequence_parallel":true},"seq_len":2048,"faults":{"links":[{"src":"n1.gpu0","dst":"n1.nvswitch","health":0}]}}`,
		`{"kind":"inference","model":{"preset":"llama2-7b","layers":8},"gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":4},"tp":8,"replicas":4,"batch":4,"prompt_tokens":128,"output_tokens":512,"full_simulation":true}`,
		`{"kind":"inference","model":{"preset":"llama2-7b","layers":8},"gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":2},"tp":2,"replicas":4,"batch":4,"prompt_tokens":128,"output_tokens":512,"faults":{"devices":[{"device":"n1.nic0"}]}}`,
	} {
		_, s, err := all.Decode([]byte(js))
		require.NoError(t, err, js)
		est := s.(spec.Budgeted).Budget().MemoryBytes
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		env := scenario.Env{Ctx: context.Background()}
		// A long decode runs in segments and releases each (core/job's
		// RunStepped): its allocation grows with the output length but its
		// heap does not, so its estimate is of the live heap's peak, seen
		// after a collection at the run's progress reports. A serving run's
		// estimate is of its peak too (its tables and requests' state).
		var peak uint64
		live := strings.Contains(js, `"kind":"inference"`) || strings.Contains(js, `"kind":"serving"`)
		if live {
			env.Progress = func(float64) {
				var ms runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapAlloc-min(ms.HeapAlloc, before.HeapAlloc))
			}
		}
		_, res, err := all.Run(env, []byte(js))
		runtime.ReadMemStats(&after)
		require.NoError(t, err, js)
		got, what := float64(after.TotalAlloc-before.TotalAlloc), "allocated"
		if live {
			got, what = float64(peak), "live at most"
		}
		// The tables' hand-over to Python: the bundle, and Python's copy.
		named := make([]table.Named, len(res.Tables))
		for i, tb := range res.Tables {
			named[i] = table.Named{Name: tb.Name, Rows: tb.Rows}
		}
		bundle, err := table.Bundle(named, nil, nil)
		require.NoError(t, err)
		got += spec.HandOverCopies * float64(len(bundle))
		t.Logf("estimate %.3g MB, %s %.3g MB (%.2fx): %s", est/1e6, what, got/1e6, est/got, js)
		// A layout search's estimate is its largest layout's step, as many
		// side by side as it runs at most; its bounds skip most layouts.
		hi := 4.0
		if strings.Contains(js, `"kind":"parallel_search"`) {
			hi = math.Inf(1)
		}
		require.True(t, est/got >= 0.8 && est/got <= hi, "estimate %.3g B, allocated %.3g B: %s", est, got, js)
	}
}

// script is a table script: every ghost's row block of the all-gather GEMM.
func script(ghosts int, bytes float64) string {
	out := "["
	for g := 1; g <= ghosts; g++ {
		if g > 1 {
			out += ","
		}
		out += fmt.Sprintf(`{"time_s":%g,"source_gpu":%d,"chunk":%d,"bytes":%g}`, float64(g)*1e-6, g, g, bytes)
	}
	return out + "]"
}

// A serving run given by its duration is estimated from the fastest a
// request can be (its output tokens at the decode floor), so its request
// count, and so the estimate, bound what the run holds.
func TestServingDurationBudgetIsAnUpperBound(t *testing.T) {
	for _, js := range []string{
		`{"kind":"serving","model":"llama3-70b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},"tp":8,"workload":{"arrival":"closed_loop","concurrency":16,"duration_s":600}}`,
		`{"kind":"serving","model":{"preset":"llama3-8b","layers":4},"gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},"workload":{"rate_per_s":50,"duration_s":200}}`,
	} {
		_, s, err := all.Decode([]byte(js))
		require.NoError(t, err, js)
		b := s.(spec.Budgeted).Budget()
		_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
		require.NoError(t, err, js)
		var requests, iterations int
		for _, tb := range res.Tables {
			switch tb.Name {
			case "requests":
				requests = reflectLen(tb.Rows)
			case "iterations":
				iterations = reflectLen(tb.Rows)
			}
		}
		require.Positive(t, requests, js)
		require.GreaterOrEqual(t, b.Events, float64(iterations), js)
		require.GreaterOrEqual(t, b.MemoryBytes, 1024*float64(requests)+128*float64(iterations), js)
	}
}

func reflectLen(rows any) int { return reflect.ValueOf(rows).Len() }

// The serving budget counts its tables' rows by their columns: the
// constants follow the row structs.
func TestBudgetRowsMatchTables(t *testing.T) {
	for _, c := range []struct {
		row  any
		want int
	}{{servingscn.RequestRow{}, spec.ServingRequestColumns}, {servingscn.IterationRow{}, spec.ServingIterationColumns}} {
		var names []string
		columns(reflect.TypeOf(c.row), nil, &names, nil)
		require.Len(t, names, c.want, "%T", c.row)
	}
}

// ranksList is "0,1,…,n−1".
func ranksList(n int) string {
	var b strings.Builder
	for r := range n {
		if r > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, r)
	}
	return b.String()
}

// A straggler on every GPU of a large cluster makes every replica
// simulated, and a spec listing every rank for the timeline holds every
// rank's rows: the budget counts both (a cluster of 131,072 GPUs so slowed
// ran out of memory in the timeline's rows, every straggler's rank listed
// by default, killing the interpreter; the default now lists 16).
func TestBudgetCountsStragglersAndTimelineRanks(t *testing.T) {
	step := func(nodes int, extra string) spec.Budget {
		js := fmt.Sprintf(`{"kind":"training","model":"gpt-1.7b","gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":%d},"parallel":{"tp":8,"global_batch":%d}%s}`, nodes, 8*nodes, extra)
		_, s, err := all.Decode([]byte(js))
		require.NoError(t, err, js)
		return s.(spec.Budgeted).Budget()
	}
	healthy := step(16384, "")
	slowed := step(16384, `,"faults":{"sample":{"straggler_probability":1}}`)
	require.Greater(t, slowed.MemoryBytes, 4*healthy.MemoryBytes, "16,384 replicas simulated, not one")
	require.Contains(t, slowed.Fields, "faults")
	listed := step(16384, `,"timeline_ranks":[`+ranksList(131072)+`]`)
	require.Greater(t, listed.MemoryBytes, float64(24<<30))
	require.Equal(t, "timeline_ranks", listed.Fields[0], "the refusal's path names what to make smaller")

	js := `{"kind":"inference","model":"llama3-8b","gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":4096},"tp":8,"replicas":4096,` +
		`"batch":8,"prompt_tokens":512,"output_tokens":64,"timeline_ranks":[` + ranksList(32768) + `]}`
	_, s, err := all.Decode([]byte(js))
	require.NoError(t, err)
	require.Equal(t, "timeline_ranks", s.(spec.Budgeted).Budget().Fields[0])

	// A long decode's default timeline is most of its memory: the
	// refusal names timeline_ranks too (its [-1] drops the rows).
	_, s, err = all.Decode([]byte(`{"kind":"inference","model":"llama3-70b","gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":1},` +
		`"tp":8,"batch":64,"prompt_tokens":4096,"output_tokens":100000}`))
	require.NoError(t, err)
	require.Contains(t, s.(spec.Budgeted).Budget().Fields, "timeline_ranks")
}

// A single-cable sweep over every cable of a large cluster (131,072 runs
// of a 16,384-GPU step, hours) is refused at validate, naming cables; a
// sample of them runs. The spec alone cannot count the cables: the kind's
// check does, with the cluster built.
func TestSingleLinkSweepOverEveryCableIsBudgeted(t *testing.T) {
	sweep := func(extra string) []byte {
		return []byte(`{"kind":"fault_sweep","mode":"single_link"` + extra + `,"training":{"model":"llama3-8b","gpu":"h100-sxm",` +
			`"cluster":{"preset":"dgx-h100","nodes":2048},"parallel":{"tp":8,"global_batch":2048}}}`)
	}
	err := all.Validate(sweep(""), 0)
	var se *spec.Error
	require.ErrorAs(t, err, &se)
	require.Equal(t, "cables", se.Problems[0].Path)
	require.ErrorContains(t, err, "131072 single-cable faults")
	// The run refuses it as validate does, before its healthy run (bounded:
	// a run that took it would go on for hours).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, rerr := all.Run(scenario.Env{Ctx: ctx}, sweep(""))
	require.ErrorAs(t, rerr, &se)
	require.Equal(t, err.Error(), rerr.Error())
	require.NoError(t, all.Validate(sweep(`,"cables":16`), 0))
	require.NoError(t, all.Validate(sweep(`,"max_events":1e12`), 0), "asked for")
}
