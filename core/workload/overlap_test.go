package workload

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// interleave alternates the two passes' segments (each ending after an
// all-to-all), backward first, and renumbers dependencies: every task still
// follows its dependencies, and each pass keeps its own order.
func TestInterleaveAlternatesSegments(t *testing.T) {
	b := &progBuilder{p: &Program{}}
	pass := func(name string) {
		c1 := b.add(Task{Name: name + ".c1", Stream: StreamCompute})
		a1 := b.add(Task{Name: name + ".a1", Stream: StreamEP, Kind: Collective, Deps: []int32{c1}})
		c2 := b.add(Task{Name: name + ".c2", Stream: StreamCompute, Deps: []int32{a1}})
		a2 := b.add(Task{Name: name + ".a2", Stream: StreamEP, Kind: Collective, Deps: []int32{c2}})
		b.add(Task{Name: name + ".c3", Stream: StreamCompute, Deps: []int32{a2}, HostWait: []int32{c1}})
	}
	b.add(Task{Name: "before"})
	pass("bwd")
	mid := int32(len(b.p.Tasks))
	pass("fwd")
	remap := b.interleave(1, mid)
	var names []string
	for _, task := range b.p.Tasks {
		names = append(names, task.Name)
	}
	require.Equal(t, []string{"before", "bwd.c1", "bwd.a1", "fwd.c1", "fwd.a1", "bwd.c2", "bwd.a2", "fwd.c2", "fwd.a2", "bwd.c3", "fwd.c3"}, names)
	require.Equal(t, int32(10), remap(10), "fwd.c3 was last and stays last")
	require.Equal(t, int32(3), remap(6), "fwd.c1 moved after bwd's first segment")
	for i, task := range b.p.Tasks {
		for _, d := range append(append([]int32{}, task.Deps...), task.HostWait...) {
			require.Less(t, d, int32(i), task.Name)
			require.Equal(t, task.Name[:4], b.p.Tasks[d].Name[:4], "a dependency stays in its pass")
		}
	}
}

// Merged schedules warm up with 2(p−s−1)+1 forwards under 1F1B, and every
// pass still appears once.
func TestMergedWarmUp(t *testing.T) {
	p, m := 4, 12
	for s := 0; s < p; s++ {
		order := stageOrder(OneFOneB, p, s, m, 1, true)
		warm := 0
		for warm < len(order) && order[warm].Forward {
			warm++
		}
		require.Equal(t, min(2*(p-s-1)+1, m)+1, warm, "stage %d: warm-up plus the first steady forward", s)
		require.Len(t, order, 2*m)
	}
}
