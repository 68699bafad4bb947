package exec

import (
	"fmt"

	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/eidolon-sim/eidolon/core/workload"
)

// allToAllV runs an expert-parallel all-to-all-v on one communicator:
// its pairs as flows (net.Comms.StartAllToAllV), or the duration of the
// same matrix's first run on a communicator with the same links
// (Options.ExactAllToAll off) that no data-parallel collective overlapped:
// the layers' all-to-alls repeat, the step's gradient reductions and
// weight gathers do not, and a run they slowed is no one's typical time.
func (e *engine) allToAllV(ci commInfo, ranks []int, task *workload.Task, pending *int, done func()) error {
	key := memoKey{sig: ci.sig, coll: e.name(string(workload.AllToAllV)), pairs: task.PairsID}
	if task.Hierarchical {
		key.hierarchical = 1
	}
	*pending++
	if d, ok := e.memo[key]; ok && !e.opt.ExactAllToAll {
		e.res.Reused++
		e.k.After(d, done)
		return nil
	}
	e.res.Collectives++
	quiet, bulk := e.bulkActive == 0, e.bulkStarted
	a := net.AllToAllV{Ranks: ranks, Bytes: task.Pairs, Hierarchical: task.Hierarchical, TopK: int(task.TopK), NodeLimit: int(task.NodeLimit),
		PathEfficiency: e.opt.Protocol, Label: task.Name}
	switch task.LowLatency {
	case workload.LowLatencyDispatch:
		a.FixedS = net.DeepEPLowLatencyDispatchS
	case workload.LowLatencyCombine:
		a.FixedS = net.DeepEPLowLatencyCombineS
	}
	if err := e.comms.StartAllToAllV(a, func(res net.Result) {
		if quiet && e.bulkActive == 0 && e.bulkStarted == bulk {
			e.memo[key] = res.End - res.Start
		}
		done()
	}); err != nil {
		return fmt.Errorf("exec: %s on ranks %v: %w", task.Name, ranks, err)
	}
	return nil
}
