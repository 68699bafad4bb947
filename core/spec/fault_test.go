package spec

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// Faults that may break the replicas' symmetry everywhere (a failed
// device, a fault after time 0, sampled link failures) count every replica
// in the budget; a failed or degraded link counts those its switch's nodes
// hold; a straggler its replica; sampled stragglers and degradations the
// replicas expected to draw one.
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
	require.Equal(t, float64(1+3*ReplicasPerFailedLink), simulatedReplicas(1024, 8, &links))
	require.Equal(t, 16.0, simulatedReplicas(16, 8, &links))

	every := Faults{Stragglers: make([]Straggler, 4096)}
	require.Equal(t, 4096.0, simulatedReplicas(4096, 8, &every), "a straggler on each replica: all simulated")
	require.Equal(t, 101.0, simulatedReplicas(4096, 8, &Faults{Stragglers: make([]Straggler, 100)}))
	sampled := Faults{Sample: &FaultSample{StragglerProbability: 0.01}}
	require.InDelta(t, 1+(1-math.Pow(0.99, 8))*4096, simulatedReplicas(4096, 8, &sampled), 1e-9)
	require.Equal(t, float64(TimelineStragglers), sampled.timelineStragglers(), "sampled stragglers fill the default timeline's share")
	require.Equal(t, float64(TimelineStragglers), every.timelineStragglers())
	require.Equal(t, 0.0, links.timelineStragglers())
}

// A link fault's health is 0 (failed) or at least MinLinkHealth: a link
// slowed beyond that would make a transfer outlast the simulated clock,
// failing the run without naming the field.
func TestLinkHealthFloor(t *testing.T) {
	for _, h := range []float64{0, math.Copysign(0, -1), MinLinkHealth, 0.5, 1} {
		var p Problems
		(&Faults{Links: []LinkFault{{Src: "a", Dst: "b", Health: h}}}).Validate(&p, "faults")
		require.NoError(t, p.Err(), "health %v", h)
	}
	for _, h := range []float64{1e-300, MinLinkHealth / 2, -0.1, 1.5, math.NaN()} {
		var p Problems
		(&Faults{Links: []LinkFault{{Src: "a", Dst: "b", Health: h}}}).Validate(&p, "faults")
		require.Len(t, p.List(), 1, "health %v", h)
		require.Equal(t, "faults.links[0].health", p.List()[0].Path)
		require.Equal(t, "0 or [1e-06, 1]", p.List()[0].Allowed)
	}
}
