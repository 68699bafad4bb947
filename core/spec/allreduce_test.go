package spec

import (
	"testing"

	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/stretchr/testify/require"
)

// The engines' custom all-reduce is on where they replay decode from CUDA
// graphs and off eagerly, unless the spec says otherwise; serving follows
// its own execution the same way.
func TestCustomAllReduceDefault(t *testing.T) {
	inf := func(doc string) *Inference {
		var s Inference
		require.NoError(t, Decode([]byte(doc), &s))
		s.Defaults()
		return &s
	}
	require.Equal(t, net.Custom, TPAllReduce(inf(`{"kind":"inference"}`).CustomAllReduce))
	require.Equal(t, net.Algorithm(""), TPAllReduce(inf(`{"kind":"inference","execution":"eager"}`).CustomAllReduce))
	require.Equal(t, net.Custom, TPAllReduce(inf(`{"kind":"inference","execution":"eager","custom_all_reduce":true}`).CustomAllReduce))
	require.Equal(t, net.Algorithm(""), TPAllReduce(inf(`{"kind":"inference","custom_all_reduce":false}`).CustomAllReduce))
	var sv Serving
	require.NoError(t, Decode([]byte(`{"kind":"serving","execution":"eager"}`), &sv))
	sv.Defaults()
	require.Equal(t, net.Algorithm(""), TPAllReduce(sv.Engine.CustomAllReduce))
	sv = Serving{}
	require.NoError(t, Decode([]byte(`{"kind":"serving","engine":{"custom_all_reduce":true},"execution":"eager"}`), &sv))
	sv.Defaults()
	require.Equal(t, net.Custom, TPAllReduce(sv.Engine.CustomAllReduce))
}
