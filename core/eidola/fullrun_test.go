package eidola

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/topo"
)

func kernelsFor(t *testing.T, gpus int, cost CostModel) []*Kernel {
	var out []*Kernel
	for _, kc := range []KernelConfig{
		{Kind: AllGatherGEMM, M: 128 * gpus, N: 1024, K: 4096, TileM: 128, TileN: 128},
		{Kind: GEMMReduceScatter, M: 128 * gpus, N: 512, K: 4096, TileM: 128, TileN: 128},
		{Kind: AllReduce, M: 64 * gpus, N: 2048, TileM: 64, TileN: 512},
	} {
		kc.DType, kc.GPUs = hw.BF16, gpus
		k, err := Build(kc, cost)
		require.NoError(t, err)
		out = append(out, k)
	}
	return out
}

// Every expected signal of GPU 0 is sent by exactly one peer, and nothing
// else is sent to it: the kernel's send plan and wait plan agree.
func TestSendsMatchExpected(t *testing.T) {
	for _, k := range kernelsFor(t, 6, flatCost{computeS: 1e-6}) {
		p := k.Config.GPUs
		got := map[Signal]int{}
		for g := 1; g < p; g++ {
			for _, s := range k.Sends {
				if (g+s.Dest)%p == 0 {
					got[Signal{Source: p - s.Dest, Chunk: s.Chunk}]++
				}
			}
		}
		require.Len(t, got, len(k.Expected), k.Config.Kind)
		for _, e := range k.Expected {
			assert.Equal(t, 1, got[e], "%s %v", k.Config.Kind, e)
		}
	}
}

func switchNet(t *testing.T, gpus int) net.Fabric {
	l, ok := hw.LinkByName("nvlink4")
	require.True(t, ok)
	tp, err := topo.SingleSwitch(gpus, l)
	require.NoError(t, err)
	return net.NewFlowNet(sim.New(), tp)
}

// Replaying the script recorded at GPU 0 of a full run reproduces GPU 0's
// kernel time from that run within 1%.
func TestReplayReproducesFullRun(t *testing.T) {
	g, _ := hw.GPUByName("h100-sxm")
	for _, gpus := range []int{4, 16} {
		// a GEMM tile of 128×128×4096 takes ~4 µs on one SM; memory traffic
		// makes tiles contend
		for _, k := range kernelsFor(t, gpus, flatCost{computeS: 4e-6, readBytes: 2e6, hbmBytes: 2e5}) {
			for _, mode := range SyncModes {
				c := Config{GPU: g, CTAsPerSM: 1, Mode: mode, PollIntervalS: 100e-9, BackoffMaxS: 3.2e-6,
					WakeLatencyS: 250e-9, ReadLatencyCycles: 260}
				full, err := FullRun(context.Background(), k, c, switchNet(t, gpus))
				require.NoError(t, err)
				require.Len(t, full.Script, len(k.Expected))
				replay, err := Simulate(context.Background(), k, c, full.Script)
				require.NoError(t, err)
				assert.InEpsilon(t, full.GPU0.KernelTimeS, replay.KernelTimeS, 0.01,
					"%s %s %d GPUs", k.Config.Kind, mode, gpus)
				assert.InDelta(t, full.GPU0.PollingReads, replay.PollingReads, 0.01*float64(full.GPU0.PollingReads)+1)
				// homogeneous GPUs on a symmetric switch: every GPU ends together
				for _, kt := range full.KernelTimesS {
					assert.InEpsilon(t, full.GPU0.KernelTimeS, kt, 0.01)
				}
			}
		}
	}
}

// The same at 256 GPUs (255 ghosts) for the all-gather + GEMM kernel.
func TestReplayReproducesFullRun256(t *testing.T) {
	if testing.Short() {
		t.Skip("a 256-GPU full run takes a fraction of a second")
	}
	g, _ := hw.GPUByName("h100-sxm")
	k, err := Build(KernelConfig{Kind: AllGatherGEMM, M: 2048, N: 512, K: 4096, TileM: 128, TileN: 128,
		DType: hw.BF16, GPUs: 256}, flatCost{computeS: 4e-6, readBytes: 2e6, hbmBytes: 2e5})
	require.NoError(t, err)
	c := Config{GPU: g, CTAsPerSM: 1, Mode: SpinWait, PollIntervalS: 100e-9, BackoffMaxS: 3.2e-6,
		WakeLatencyS: 250e-9, ReadLatencyCycles: 260}
	full, err := FullRun(context.Background(), k, c, switchNet(t, 256))
	require.NoError(t, err)
	require.Len(t, full.Script, 255)
	replay, err := Simulate(context.Background(), k, c, full.Script)
	require.NoError(t, err)
	assert.InEpsilon(t, full.GPU0.KernelTimeS, replay.KernelTimeS, 0.01)
}

// A peer's write landing while tiles compute must not restart their
// progress: the replay of the recorded script gives GPU 0's run cycle for
// cycle, in every mode, with writes arriving mid-tile (8 SMs, tiles of an
// odd length against NVLink's delivery times).
func TestReplayIsExactWhenWritesLandMidTile(t *testing.T) {
	for _, gpus := range []int{4, 8} {
		for _, k := range kernelsFor(t, gpus, flatCost{computeS: 3.7e-6, readBytes: 2e6, hbmBytes: 2e5}) {
			for _, mode := range SyncModes {
				c := testConfig(mode)
				full, err := FullRun(context.Background(), k, c, switchNet(t, gpus))
				require.NoError(t, err)
				replay, err := Simulate(context.Background(), k, c, full.Script)
				require.NoError(t, err)
				require.Equal(t, full.GPU0.Cycles, replay.Cycles, "%s %s %d GPUs", k.Config.Kind, mode, gpus)
				require.Equal(t, full.GPU0.CTAs, replay.CTAs, "%s %s %d GPUs", k.Config.Kind, mode, gpus)
			}
		}
	}
}
