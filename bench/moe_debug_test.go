package bench

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/eidolon-sim/eidolon/core/scenario/training"
)

func TestDebugMoE(t *testing.T) {
	js := `{"kind":"training","model":"deepseek-v3","gpu":"h800",
		"cluster":{"preset":"dgx-h800","nodes":256},
		"parallel":{"tp":1,"pp":16,"dp":128,"ep":64,"micro_batch":1,"global_batch":15360,"zero":1,"recompute":"full"},
		"seq_len":4096,"dtype":"fp8","timeline_ranks":[1024]}`
	_, res, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
	if err != nil {
		t.Fatal(err)
	}
	s := res.Tables[0].Rows.([]training.SummaryRow)[0]
	t.Logf("%+v", s)
	by := map[string]float64{}
	for _, r := range res.Tables[2].Rows.([]training.TimelineRow) {
		n := r.Name
		if i := strings.Index(n, "."); i >= 0 && strings.HasPrefix(n, "mb") {
			n = n[i+1:]
		}
		by[r.Stream+" "+n] += r.EndS - r.StartS
	}
	var keys []string
	for k := range by {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return by[keys[i]] > by[keys[j]] })
	for _, k := range keys[:min(25, len(keys))] {
		fmt.Printf("%-70s %.3f\n", k, by[k])
	}
	for _, m := range res.Tables[3].Rows.([]training.MemoryRow) {
		if m.Stage == 8 {
			fmt.Printf("mem %s %.2f GB\n", m.Category, m.Bytes/1e9)
		}
	}
}
