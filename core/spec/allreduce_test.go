package spec

import (
	"testing"

	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/stretchr/testify/require"
)

// The engines' custom all-reduce is on where they replay decode from CUDA
// graphs and off eagerly, unless the spec says otherwise; serving follows
// its own execution the same way. Its rules are vLLM's unless the spec
// names TensorRT-LLM's, whose built engine carries its plugin eagerly too.
func TestCustomAllReduceDefault(t *testing.T) {
	inf := func(doc string) net.Algorithm {
		var s Inference
		require.NoError(t, Decode([]byte(doc), &s))
		s.Defaults()
		return TPAllReduce(s.CustomAllReduce, s.CustomAllReduceEngine)
	}
	serving := func(doc string) net.Algorithm {
		var s Serving
		require.NoError(t, Decode([]byte(doc), &s))
		s.Defaults()
		return TPAllReduce(s.Engine.CustomAllReduce, s.Engine.CustomAllReduceEngine)
	}
	require.Equal(t, net.Custom, inf(`{"kind":"inference"}`))
	require.Equal(t, net.Algorithm(""), inf(`{"kind":"inference","execution":"eager"}`))
	require.Equal(t, net.Custom, inf(`{"kind":"inference","execution":"eager","custom_all_reduce":true}`))
	require.Equal(t, net.Algorithm(""), inf(`{"kind":"inference","custom_all_reduce":false}`))
	require.Equal(t, net.CustomTRTLLM, inf(`{"kind":"inference","custom_all_reduce_engine":"tensorrt_llm"}`))
	require.Equal(t, net.Algorithm(""), inf(`{"kind":"inference","custom_all_reduce":false,"custom_all_reduce_engine":"tensorrt_llm"}`))
	require.Equal(t, net.Algorithm(""), serving(`{"kind":"serving","execution":"eager"}`))
	require.Equal(t, net.Custom, serving(`{"kind":"serving","engine":{"custom_all_reduce":true},"execution":"eager"}`))
	require.Equal(t, net.CustomTRTLLM, serving(`{"kind":"serving","engine":{"custom_all_reduce_engine":"tensorrt_llm"}}`))
	require.Equal(t, net.CustomTRTLLM, inf(`{"kind":"inference","execution":"eager","custom_all_reduce_engine":"tensorrt_llm"}`))
	require.Equal(t, net.CustomTRTLLM, serving(`{"kind":"serving","execution":"eager","engine":{"custom_all_reduce_engine":"tensorrt_llm"}}`))
}
