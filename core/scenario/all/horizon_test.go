package all_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/eidolon-sim/eidolon/core/sim"
)

// A compute task slowed by an overlapping collective whose end passes the
// horizon of simulated time is a HorizonError, not a panic: its stretched
// time saturates instead of wrapping to before now (the reliability corpus's
// seed 15 case 1484: 2,000 layers of 16M tokens).
func TestInterferencePastTheHorizonIsAnError(t *testing.T) {
	js := `{"kind":"fault_sweep","seed":5,"samples":2,"link_failures":1,"degraded_health":0.2,"training":{"model":{"preset":"gpt-22b","layers":2000},
		"gpu":"a100-80gb-sxm","cluster":{"preset":"dgx-a100","nodes":1},"parallel":{"tp":8,"global_batch":2},"seq_len":16777216,"timeline_ranks":[-16]}}`
	_, _, err := all.Run(scenario.Env{Ctx: context.Background()}, []byte(js))
	var he *sim.HorizonError
	require.True(t, errors.As(err, &he), "%v", err)
}
