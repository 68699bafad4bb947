package all_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/stretchr/testify/require"
)

// minimal is a small spec of every kind: each must validate clean, survive
// defaults → JSON → decode unchanged, and run to the same tables twice and
// on one or four cores. A new kind fails TestEveryKind until it has one.
var minimal = map[string]string{
	"selftest":  `{"kind":"selftest","iterations":1000}`,
	"operators": `{"kind":"operators","gpu":"a100-80gb-sxm","model":{"preset":"llama2-7b","layers":2},"batch":1,"seq_len":128}`,
	"collective": `{"kind":"collective","cluster":{"topology":"switch","gpus":4,"link":"nvlink3"},"sizes_bytes":[1e6],
		"algorithms":["ring","nccl"]}`,
	"seedflood": `{"kind":"seedflood","topology":{"kind":"ring","clients":4},"steps":3,"methods":["seedflood","dsgd"],
		"dataset":{"samples":60,"n_features":3,"classes":2}}`,
	"eidola":   `{"kind":"eidola","ghosts":3,"gemm":{"m":256,"n":256,"k":512},"tile":{"m":128,"n":128}}`,
	"training": trainingSpec(1, `"tp":4,"pp":2,"global_batch":4`, ""),
	"inference": `{"kind":"inference","model":{"preset":"llama2-7b","layers":2},"gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},
		"tp":2,"batch":2,"prompt_tokens":64,"output_tokens":3}`,
	"serving": `{"kind":"serving","model":{"preset":"llama3-8b","layers":2},"gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},
		"workload":{"rate_per_s":10,"requests":40,"warmup_requests":4}}`,
	"fault_sweep": `{"kind":"fault_sweep","seed":5,"mode":"single_link","degraded_health":0.5,"single_link_faults":"degrade",
		"collective":{"cluster":{"topology":"ring","gpus":4,"bandwidth_bytes_per_s":1e11,"latency_s":1e-6},"collective":"all_reduce","algorithms":["ring"],"sizes_bytes":[1e6]}}`,
	"ssm_tp": `{"kind":"ssm_tp","model":{"preset":"mamba-2.8b","layers":2},"gpu":"a100-80gb-sxm","cluster":{"topology":"switch","gpus":2,"link":"nvlink3"},
		"tp_degrees":[1,2],"batch":2,"prompt_lengths":[128],"output_length":2}`,
	"parallel_search": `{"kind":"parallel_search","model":{"preset":"gpt-22b","layers":4},"gpu":"a100-80gb-sxm",
		"cluster":{"preset":"dgx-a100","nodes":1},"global_batch":8,"seq_len":512}`,
	"calibrate": `{"kind":"calibrate","gpu":"a100-80gb-sxm","max_iterations":60,"kernels":[
		{"op":"gemm","m":1024,"n":4096,"k":4096,"time_s":1.5e-4},{"op":"gemm","m":2048,"n":4096,"k":4096,"time_s":2.9e-4},
		{"op":"elementwise","bytes":1e8,"time_s":6.5e-5},{"op":"gemm","m":4096,"n":4096,"k":4096,"time_s":5.8e-4}]}`,
}

func TestEveryKind(t *testing.T) {
	for _, k := range all.Kinds() {
		t.Run(k.Name, func(t *testing.T) {
			doc, ok := minimal[k.Name]
			require.True(t, ok, "kind %q has no minimal spec in core/scenario/all/kinds_test.go", k.Name)

			// A minimal spec validates clean.
			_, s, err := all.Decode([]byte(doc))
			require.NoError(t, err, doc)

			// Defaults, then JSON, then decode: the same spec.
			once, err := json.Marshal(s)
			require.NoError(t, err)
			_, again, err := all.Decode(once)
			require.NoError(t, err, "%s after defaults: %s", k.Name, once)
			twice, err := json.Marshal(again)
			require.NoError(t, err)
			require.JSONEq(t, string(once), string(twice), "defaults → JSON → decode changed the %s spec", k.Name)

			// Two runs, on one core and on four: byte-identical tables.
			var first string
			for _, procs := range []int{1, 4} {
				prev := runtime.GOMAXPROCS(procs)
				_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(doc))
				runtime.GOMAXPROCS(prev)
				require.NoError(t, err, doc)
				got := formatTables(res)
				if first == "" {
					first = got
					continue
				}
				require.Equal(t, first, got, "%s: tables differ between GOMAXPROCS 1 and %d", k.Name, procs)
			}
		})
	}
}

// The H200 preset is the H100's with the H200's memory (141 GB at
// 4.8 TB/s; core/hw/presets.go), so an H100 given those two figures is the
// same part: every kind that takes a GPU gives byte-identical tables on
// both, and the what-if spec survives defaults → JSON → decode.
func TestWhatIfGPUIsThePresetItDescribes(t *testing.T) {
	whatIf := map[string]any{"preset": "h100-sxm", "name": "h200", "hbm_bytes": 141e9, "hbm_bandwidth_bytes_per_s": 4.8e12}
	ran, moved := 0, 0
	for _, k := range all.Kinds() {
		if k.Name == "calibrate" {
			continue // its summary writes out the spec of the part it starts from
		}
		var doc map[string]any
		require.NoError(t, json.Unmarshal([]byte(minimal[k.Name]), &doc))
		tables := func(gpu any) (string, bool) {
			doc["gpu"] = gpu
			js, err := json.Marshal(doc)
			require.NoError(t, err)
			_, s, err := all.Decode(js)
			if err != nil {
				require.ErrorContains(t, err, "gpu: unknown field", k.Name)
				return "", false // a kind with no GPU of its own
			}
			once, err := json.Marshal(s)
			require.NoError(t, err)
			_, again, err := all.Decode(once)
			require.NoError(t, err, string(once))
			twice, err := json.Marshal(again)
			require.NoError(t, err)
			require.JSONEq(t, string(once), string(twice), k.Name)
			_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, js)
			require.NoError(t, err, string(js))
			return formatTables(res), true
		}
		want, ok := tables("h200")
		if !ok {
			continue
		}
		got, _ := tables(whatIf)
		require.Equal(t, want, got, k.Name)
		ran++
		if h100, _ := tables("h100-sxm"); h100 != want {
			moved++ // the memory matters to this run: the figures took effect
		}
	}
	require.GreaterOrEqual(t, ran, 7) // operators, eidola, training, inference, serving, ssm_tp, parallel_search
	require.GreaterOrEqual(t, moved, 5)
}

// A what-if link is the link it describes: an NDR NIC at XDR's bandwidth
// (their latency and protocol efficiency are the same) gives XDR's tables,
// and a ring's link given as an object gives what the cluster-level
// override gives; neither is the unchanged link's.
func TestWhatIfLinkIsTheLinkItDescribes(t *testing.T) {
	tables := func(cluster string) string {
		js := `{"kind":"collective","cluster":` + cluster + `,"sizes_bytes":[1e6,1e8],"algorithms":["ring","nccl"]}`
		_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
		require.NoError(t, err, js)
		return formatTables(res)
	}
	for _, c := range []struct{ whatIf, same, before, tech string }{
		{`{"topology":"composed","nodes":2,"nic_link":{"preset":"ib-ndr","bandwidth_bytes_per_s":1e11}}`,
			`{"topology":"composed","nodes":2,"nic_link":"ib-xdr"}`,
			`{"topology":"composed","nodes":2,"nic_link":"ib-ndr"}`, "ib-xdr"},
		{`{"topology":"ring","gpus":4,"link":{"preset":"nvlink4","bandwidth_bytes_per_s":9e11,"latency_s":2e-6}}`,
			`{"topology":"ring","gpus":4,"link":"nvlink4","bandwidth_bytes_per_s":9e11,"latency_s":2e-6}`,
			`{"topology":"ring","gpus":4,"link":"nvlink4"}`, "nvlink4"},
	} {
		// The links table names each link's technology, the preset's.
		got := strings.ReplaceAll(tables(c.whatIf), "\tib-ndr\t", "\t"+c.tech+"\t")
		require.Equal(t, tables(c.same), got, c.whatIf)
		require.NotEqual(t, tables(c.before), got, c.whatIf)
	}
}

// A what-if part at the ends of the figures' ranges (every figure at its
// least, then at its greatest) runs every kind that takes a GPU to finite
// tables, or stops with a clean error: the ranges keep the prices finite.
func TestWhatIfGPUAtTheRangesEnds(t *testing.T) {
	for _, end := range []string{"least", "greatest"} {
		gpu := map[string]any{"preset": "h100-sxm"}
		for _, f := range hw.Figures() {
			v := f.Max
			if end == "least" {
				v = math.Max(f.Min, 1e9*float64(boolInt(strings.HasPrefix(f.Name, "peak_")))) // a part with math units
			}
			gpu[f.Name] = v
		}
		for _, k := range all.Kinds() {
			var doc map[string]any
			require.NoError(t, json.Unmarshal([]byte(minimal[k.Name]), &doc))
			doc["gpu"] = gpu
			js, err := json.Marshal(doc)
			require.NoError(t, err)
			if _, _, err := all.Decode(js); err != nil {
				require.ErrorContains(t, err, "gpu: unknown field", k.Name)
				continue
			}
			_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, js)
			if err != nil {
				t.Logf("%s at the %s figures: %v", k.Name, end, err)
				require.NotContains(t, err.Error(), "panic", "%s at the %s figures", k.Name, end)
				continue
			}
			requireFinite(t, res, fmt.Sprintf("%s at the %s figures", k.Name, end))
		}
	}
}

// requireFinite fails the test when a float cell of a result's tables is
// NaN or infinite, a nullable one included where it is set.
func requireFinite(t *testing.T, res scenario.Result, what string) {
	t.Helper()
	for _, tb := range res.Tables {
		rows := reflect.ValueOf(tb.Rows)
		for i := 0; i < rows.Len(); i++ {
			columns(rows.Type().Elem(), nil, nil, func(idx []int) {
				f := rows.Index(i).FieldByIndex(idx)
				if f.Kind() == reflect.Pointer && !f.IsNil() {
					f = f.Elem()
				}
				if f.Kind() == reflect.Float64 {
					require.False(t, math.IsNaN(f.Float()) || math.IsInf(f.Float(), 0), "%s: %s", what, tb.Name)
				}
			})
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Every kind's spec decodes through the strict decoder: an unknown field
// is a problem naming it, for each kind.
func TestEveryKindRejectsUnknownFields(t *testing.T) {
	for _, k := range all.Kinds() {
		doc := minimal[k.Name]
		if doc == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(doc), &m))
		m["no_such_field"] = 1
		bad, _ := json.Marshal(m)
		_, _, err := all.Decode(bad)
		var se *spec.Error
		require.ErrorAs(t, err, &se, k.Name)
		require.Contains(t, fmt.Sprint(err), "no_such_field", k.Name)
	}
}
