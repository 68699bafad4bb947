package spec

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Faults that break the replicas' symmetry (a failed link or device, a
// fault after time 0, sampled link failures) make every replica simulated
// and counted in the budget; a degraded link or a straggler does not.
func TestFaultsThatSimulateEveryReplica(t *testing.T) {
	for _, c := range []struct {
		name string
		f    Faults
		want bool
	}{
		{"degraded link", Faults{Links: []LinkFault{{Src: "a", Dst: "b", Health: 0.5}}}, false},
		{"straggler", Faults{Stragglers: []Straggler{{Device: "n0.gpu1", Slowdown: 2}}}, false},
		{"sampled degradations", Faults{Sample: &FaultSample{LinkDegradeProbability: 0.1}}, false},
		{"failed link", Faults{Links: []LinkFault{{Src: "a", Dst: "b", Health: 0}}}, true},
		{"failed device", Faults{Devices: []DeviceFault{{Device: "spine3"}}}, true},
		{"degraded later", Faults{Links: []LinkFault{{Src: "a", Dst: "b", Health: 0.5, AtS: 1}}}, true},
		{"degraded until", Faults{Links: []LinkFault{{Src: "a", Dst: "b", Health: 0.5, UntilS: 1}}}, true},
		{"sampled failures", Faults{Sample: &FaultSample{LinkFailureProbability: 0.01}}, true},
	} {
		require.Equal(t, c.want, c.f.EveryReplica(), c.name)
	}
}
