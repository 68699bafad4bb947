package all_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

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
