package spec

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Faults that may break the replicas' symmetry everywhere (a failed
// device, a fault after time 0, sampled link failures) count every replica
// in the budget; a failed link counts those its switch's nodes hold; a
// degraded link or a straggler one.
func TestFaultsThatSimulateEveryReplica(t *testing.T) {
	for _, c := range []struct {
		name string
		f    Faults
		want bool
	}{
		{"degraded link", Faults{Links: []LinkFault{{Src: "a", Dst: "b", Health: 0.5}}}, false},
		{"straggler", Faults{Stragglers: []Straggler{{Device: "n0.gpu1", Slowdown: 2}}}, false},
		{"sampled degradations", Faults{Sample: &FaultSample{LinkDegradeProbability: 0.1}}, false},
		{"failed link", Faults{Links: []LinkFault{{Src: "a", Dst: "b", Health: 0}}}, false},
		{"failed device", Faults{Devices: []DeviceFault{{Device: "spine3"}}}, true},
		{"degraded later", Faults{Links: []LinkFault{{Src: "a", Dst: "b", Health: 0.5, AtS: 1}}}, true},
		{"degraded until", Faults{Links: []LinkFault{{Src: "a", Dst: "b", Health: 0.5, UntilS: 1}}}, true},
		{"sampled failures", Faults{Sample: &FaultSample{LinkFailureProbability: 0.01}}, true},
	} {
		require.Equal(t, c.want, c.f.EveryReplica(), c.name)
	}
	links := Faults{Links: []LinkFault{{Src: "a", Dst: "b", Health: 0}, {Src: "c", Dst: "d", Health: 0.5}, {Src: "e", Dst: "f", Health: 0}}}
	require.Equal(t, 2, links.FailedLinks())
	require.Equal(t, float64(1+2*ReplicasPerFailedLink), simulatedReplicas(1024, &links))
	require.Equal(t, 16.0, simulatedReplicas(16, &links))
}
