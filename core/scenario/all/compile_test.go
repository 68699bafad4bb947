package all_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/eidolon-sim/eidolon/core/spec"
)

// A fault sweep compiles its base under the base's path: a misspelled
// device in a training base's faults is rejected by validation (before any
// run), at training.faults.…, with every problem of the base at once; the
// same spec at the top level reports the same problems without the prefix,
// and Run rejects it the same way.
func TestFaultSweepBaseProblemsCarryTheBasePath(t *testing.T) {
	training := `{"model":{"preset":"gpt-22b","layers":4},"gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":2},
		"parallel":{"tp":8,"dp":2,"global_batch":4},"seq_len":1024,
		"faults":{"links":[{"src":"n0.gpu9","dst":"n0.nvswitch","health":0.5}],"stragglers":[{"device":"n1.gpu0","slowdown":2},{"device":"n7.gpu0","slowdown":2}]}}`
	paths := func(err error) []string {
		var se *spec.Error
		require.ErrorAs(t, err, &se)
		var out []string
		for _, p := range se.Problems {
			out = append(out, p.Path)
		}
		return out
	}
	sweep := []byte(`{"kind":"fault_sweep","seed":7,"samples":2,"link_failures":1,"training":` + training + `}`)
	err := all.Validate(sweep, 0)
	require.Equal(t, []string{"training.faults.links[0].src", "training.faults.stragglers[1].device"}, paths(err))
	require.ErrorContains(t, err, `no device named "n0.gpu9"`)
	_, _, runErr := all.Run(scenario.Env{Ctx: context.Background()}, sweep)
	require.Equal(t, err.Error(), runErr.Error(), "run rejects what validate does, in the same words")

	top := []byte(`{"kind":"training",` + training[1:])
	require.Equal(t, []string{"faults.links[0].src", "faults.stragglers[1].device"}, paths(all.Validate(top, 0)))

	// A rank on a GPU the cluster lacks, and a layout it cannot hold, inside
	// an inference base.
	inf := []byte(`{"kind":"fault_sweep","samples":1,"link_failures":1,"inference":{"model":"llama2-7b","gpu":"a100-80gb-sxm",
		"cluster":{"preset":"dgx-a100","nodes":1,"ranks":[0,1,2,3,4,5,6,99]},"tp":2,"replicas":4,"batch":2,"prompt_tokens":128,"output_tokens":2}}`)
	require.Equal(t, []string{"inference.cluster.ranks[7]"}, paths(all.Validate(inf, 0)))
	inf = []byte(`{"kind":"fault_sweep","samples":1,"link_failures":1,"inference":{"model":"llama2-7b","gpu":"a100-80gb-sxm",
		"cluster":{"preset":"dgx-a100","nodes":1},"tp":4,"replicas":4,"batch":2,"prompt_tokens":128,"output_tokens":2}}`)
	require.Equal(t, []string{"inference.replicas"}, paths(all.Validate(inf, 0)))

	// A collective base's group, and a sweep asking for more faults than the
	// cluster has.
	coll := []byte(`{"kind":"fault_sweep","samples":1,"link_failures":1,"collective":{"cluster":{"topology":"ring","gpus":4},
		"group":[0,1,9],"sizes_bytes":[1e6]}}`)
	require.Equal(t, []string{"collective.group[2]"}, paths(all.Validate(coll, 0)))
	coll = []byte(`{"kind":"fault_sweep","samples":1,"nic_failures":1,"collective":{"cluster":{"topology":"ring","gpus":4},"sizes_bytes":[1e6]}}`)
	require.Equal(t, []string{"nic_failures"}, paths(all.Validate(coll, 0)))
}

// Every kind that builds a cluster compiles it in its Check: validation
// rejects what a run would, with the same problems.
func TestValidateRejectsWhatRunRejects(t *testing.T) {
	for _, tc := range []struct{ name, doc, path string }{
		{"ssm_tp", `{"kind":"ssm_tp","model":{"preset":"mamba-2.8b","layers":2},"gpu":"a100-80gb-sxm",
			"cluster":{"topology":"switch","gpus":2,"link":"nvlink3"},"tp_degrees":[1,4],"batch":2,"prompt_lengths":[128],"output_length":2}`,
			"tp_degrees[1]"},
		{"parallel_search", `{"kind":"parallel_search","model":{"preset":"gpt-22b","layers":4},"gpu":"a100-80gb-sxm",
			"cluster":{"preset":"dgx-a100","nodes":1,"ranks":[0,1,2,3,4,5,6,8]},"global_batch":8,"seq_len":512}`, "cluster.ranks[7]"},
		{"serving", `{"kind":"serving","model":{"preset":"llama3-8b","layers":2},"gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},
			"faults":{"devices":[{"device":"n0.nic9"}]},"workload":{"rate_per_s":10,"requests":4}}`, "faults.devices[0].device"},
		{"collective", `{"kind":"collective","cluster":{"topology":"ring","gpus":4},"faults":{"stragglers":[{"device":"gpu4","slowdown":2}]},
			"sizes_bytes":[1e6]}`, "faults.stragglers[0].device"},
		{"eidola", `{"kind":"eidola","ghosts":7,"cluster":{"topology":"switch","gpus":4,"link":"nvlink3"}}`, "cluster"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := all.Validate([]byte(tc.doc), 0)
			var se *spec.Error
			require.ErrorAs(t, err, &se)
			require.Equal(t, tc.path, se.Problems[0].Path)
			_, _, runErr := all.Run(scenario.Env{Ctx: context.Background()}, []byte(tc.doc))
			require.Error(t, runErr)
			require.Equal(t, err.Error(), runErr.Error())
		})
	}
}
