package all_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/*.txt from the code")

// trainingSpec is a 4-layer GPT-22B on DGX A100 nodes.
func trainingSpec(nodes int, parallel, extra string) string {
	return fmt.Sprintf(`{"kind":"training","model":{"preset":"gpt-22b","layers":4},"gpu":"a100-80gb-sxm",
		"cluster":{"preset":"dgx-a100","nodes":%d},"parallel":{%s},"seq_len":1024%s}`, nodes, parallel, extra)
}

// goldens are small runs of the kinds built on package exec, whose tables
// (every column but wall times) are compared byte for byte with
// testdata/golden/<name>.txt: a refactor must leave them unchanged, a model
// change regenerates them with -update and shows the change as a diff.
var goldens = []struct{ name, spec string }{
	{"training_tp_pp_dp", trainingSpec(2, `"tp":4,"pp":2,"dp":2,"global_batch":8,"sequence_parallel":true,"recompute":"selective"`, "")},
	{"training_zero3", trainingSpec(1, `"tp":2,"pp":1,"dp":4,"global_batch":8,"zero":3,"overlap_grad_reduce":true`, "")},
	{"training_interleaved_degraded", trainingSpec(2, `"tp":4,"pp":2,"dp":2,"global_batch":8,"schedule":"interleaved","virtual_stages":2`,
		`,"faults":{"links":[{"src":"n1.gpu2","dst":"n1.nvswitch","health":0.5}]}`)},
	{"training_cuda_graphs", `{"kind":"training","model":{"preset":"llama2-7b","layers":4},"gpu":"a100-80gb-sxm",
		"cluster":{"preset":"dgx-a100","nodes":1},"parallel":{"tp":8,"global_batch":2,"micro_batch":1},"seq_len":128,"execution":"cuda_graphs"}`},
	{"training_full_ring_steps", trainingSpec(2, `"tp":2,"pp":2,"zero":1,"global_batch":16`, `,"full_simulation":true,"ring_steps":true`)},
	{"training_moe", `{"kind":"training","model":{"preset":"deepseek-v3","layers":4},"gpu":"h800",
		"cluster":{"preset":"dgx-h800","nodes":2},"parallel":{"tp":1,"pp":1,"dp":16,"ep":16,"global_batch":16},"seq_len":512}`},
	{"inference_llama", `{"kind":"inference","model":"llama2-7b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},
		"tp":2,"replicas":2,"batch":4,"prompt_tokens":256,"output_tokens":4}`},
	{"inference_cuda_graphs_requests", `{"kind":"inference","model":"llama2-7b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},
		"tp":4,"pp":2,"execution":"cuda_graphs","requests":[{"count":2,"prompt_tokens":128,"output_tokens":3},{"count":1,"prompt_tokens":512,"output_tokens":2}]}`},
	{"inference_moe", `{"kind":"inference","model":{"preset":"deepseek-v3","layers":4},"gpu":"h800",
		"cluster":{"preset":"dgx-h800","nodes":2},"replicas":16,"ep":16,"batch":32,"prompt_tokens":256,"output_tokens":3,"dtype":"fp8"}`},
	{"fault_sweep_training", `{"kind":"fault_sweep","seed":7,"samples":3,"link_failures":1,"training":{"model":{"preset":"gpt-22b","layers":4},
		"gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":2},"parallel":{"tp":8,"dp":2,"global_batch":4},"seq_len":1024,"timeline_ranks":[-1]}}`},
	{"fault_sweep_inference", `{"kind":"fault_sweep","seed":3,"samples":2,"link_degradations":1,"inference":{"model":"llama2-7b","gpu":"a100-80gb-sxm",
		"cluster":{"preset":"dgx-a100","nodes":1},"tp":2,"replicas":4,"batch":2,"prompt_tokens":128,"output_tokens":2}}`},
	{"fault_sweep_collective", `{"kind":"fault_sweep","seed":5,"mode":"single_link","degraded_health":0.5,
		"single_link_faults":"degrade",
		"collective":{"cluster":{"topology":"ring","gpus":8,"bandwidth_bytes_per_s":1e11,"latency_s":1e-6},"collective":"all_reduce","algorithms":["ring"],"sizes_bytes":[1e8]}}`},
}

func TestGoldenTables(t *testing.T) {
	for _, g := range goldens {
		t.Run(g.name, func(t *testing.T) {
			_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(g.spec))
			require.NoError(t, err, g.spec)
			got := formatTables(res)
			path := filepath.Join("testdata", "golden", g.name+".txt")
			if *update {
				require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
				return
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run go test ./core/scenario/all -run TestGoldenTables -update")
			require.Equal(t, string(want), got, "tables of %s changed (regenerate with -update and review the diff)", g.name)
		})
	}
}

// formatTables prints every table as tab-separated columns, floats in the
// shortest form that parses back to the same bits; wall-time columns
// (wall_*) are left out.
func formatTables(res scenario.Result) string {
	var b strings.Builder
	for _, tb := range res.Tables {
		rows := reflect.ValueOf(tb.Rows)
		fmt.Fprintf(&b, "## %s (%d rows)\n", tb.Name, rows.Len())
		var names []string
		columns(rows.Type().Elem(), nil, &names, nil)
		b.WriteString(strings.Join(names, "\t") + "\n")
		for i := 0; i < rows.Len(); i++ {
			var cells []string
			columns(rows.Type().Elem(), nil, nil, func(idx []int) {
				cells = append(cells, cell(rows.Index(i).FieldByIndex(idx)))
			})
			b.WriteString(strings.Join(cells, "\t") + "\n")
		}
	}
	return b.String()
}

// columns walks a row type's arrow columns (embedded structs flattened),
// appending their names and/or calling visit with each field's index.
func columns(t reflect.Type, prefix []int, names *[]string, visit func([]int)) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		idx := append(append([]int{}, prefix...), i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			columns(f.Type, idx, names, visit)
			continue
		}
		name := f.Tag.Get("arrow")
		if name == "" || name == "-" || strings.HasPrefix(name, "wall") {
			continue
		}
		if names != nil {
			*names = append(*names, name)
		}
		if visit != nil {
			visit(idx)
		}
	}
}

func cell(v reflect.Value) string {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return "null"
		}
		return cell(v.Elem())
	case reflect.Float32, reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case reflect.Slice:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = cell(v.Index(i))
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return fmt.Sprint(v.Interface())
}
