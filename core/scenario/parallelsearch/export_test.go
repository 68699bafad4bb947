package parallelsearch

import (
	"context"

	"github.com/eidolon-sim/eidolon/core/exec"
	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/eidolon-sim/eidolon/core/spec"
)

// PanicInLayout makes the simulation of every layout with tensor-parallel
// degree tp panic, until the returned function restores it.
func PanicInLayout(tp int) (restore func()) {
	prev := simulateLayout
	simulateLayout = func(ctx context.Context, s *spec.ParallelSearch, w *worker, c *candidate, cost func(model.Op) (float64, error),
		kernel func(model.Op) (exec.Kernel, error)) (float64, float64, error) {
		if c.row.TP == tp {
			var m map[string]int
			m["boom"]++ // a real runtime panic: assignment to a nil map
		}
		return prev(ctx, s, w, c, cost, kernel)
	}
	return func() { simulateLayout = prev }
}

// SearchProgress is searchProgress over candidates with the lower bounds lbs.
func SearchProgress(lbs []float64, i int, kth float64) float64 {
	cands := make([]*candidate, len(lbs))
	for j, lb := range lbs {
		cands[j] = &candidate{lb: lb}
	}
	return searchProgress(cands, i, kth)
}
