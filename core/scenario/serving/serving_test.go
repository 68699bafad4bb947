package serving_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/eidolon-sim/eidolon/core/scenario/serving"
	"github.com/stretchr/testify/require"
)

func run(t *testing.T, extra string) scenario.Result {
	t.Helper()
	js := fmt.Sprintf(`{"kind":"serving","model":"llama2-7b","gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1}%s}`, extra)
	_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
	require.NoError(t, err, js)
	return res
}

func table[T any](res scenario.Result, name string) []T {
	for _, tb := range res.Tables {
		if tb.Name == name {
			return tb.Rows.([]T)
		}
	}
	return nil
}

func TestSmoke(t *testing.T) {
	res := run(t, `,"workload":{"rate_per_s":20,"requests":500}`)
	s := table[serving.SummaryRow](res, "summary")[0]
	t.Logf("%+v", s)
}
