package training_test

import (
	"context"
	"testing"

	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/stretchr/testify/require"
)

func runJSON(t testing.TB, js string) scenario.Result {
	_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
	require.NoError(t, err)
	return res
}

func TestSmoke(t *testing.T) {
	for _, js := range []string{
		`{"kind":"training","model":"gpt-22b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},
 "parallel":{"tp":8,"micro_batch":4,"global_batch":4,"recompute":"selective","sequence_parallel":true},
 "seq_len":2048,"dtype":"fp16","unfused_attention":true}`,
		`{"kind":"training","model":"gpt-22b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},
 "parallel":{"tp":8,"micro_batch":4,"global_batch":4,"recompute":"full"},
 "seq_len":2048,"dtype":"fp16","unfused_attention":true}`,
		`{"kind":"training","model":"gpt3-175b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":8},
 "parallel":{"tp":8,"pp":8,"micro_batch":1,"global_batch":64,"recompute":"selective","sequence_parallel":true,"virtual_stages":3},
 "seq_len":2048,"dtype":"fp16","unfused_attention":true}`,
		`{"kind":"training","model":"gpt3-175b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":8},
 "parallel":{"tp":8,"pp":8,"micro_batch":1,"global_batch":64,"recompute":"full","virtual_stages":3},
 "seq_len":2048,"dtype":"fp16","unfused_attention":true}`,
		`{"kind":"inference","model":"llama2-7b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},
 "tp":1,"batch":1,"prompt_tokens":200,"output_tokens":200}`,
		`{"kind":"inference","model":"llama2-7b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},
 "tp":8,"batch":1,"prompt_tokens":200,"output_tokens":200}`,
	} {
		res := runJSON(t, js)
		t.Logf("%+v", res.Tables[0].Rows)
	}
}
