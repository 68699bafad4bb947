package spec

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/eidolon-sim/eidolon/core/topo"
)

// The spec's vocabularies are the models': a name the models build is
// accepted, a misspelled one is refused with its path and a suggestion.
func TestVocabulariesAreTheModels(t *testing.T) {
	require.Equal(t, topo.Presets(), ClusterPresets())
	require.Equal(t, topo.Kinds(), ClusterTopologies())
	require.Len(t, CollectiveNames(), len(net.Ops()))
	for _, name := range topo.Presets() {
		c := Cluster{Preset: name}
		c.Defaults()
		var p Problems
		c.Validate(&p, "cluster")
		require.NoError(t, p.Err(), name)
	}
	c := Cluster{Preset: "dgx-a10"}
	c.Defaults()
	var p Problems
	c.Validate(&p, "cluster")
	require.ErrorContains(t, p.Err(), `cluster.preset: must be one of`)
	require.ErrorContains(t, p.Err(), `did you mean "dgx-a100"?`)
	for _, op := range net.Ops() {
		require.Equal(t, string(net.Algorithms(op)[0]), CollectiveAlgorithms()[string(op)][0], "default first")
	}
}
