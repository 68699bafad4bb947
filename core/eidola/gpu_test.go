package eidola

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/hw"
)

// flatCost is a closed-form cost model for tests: every CTA computes for a
// fixed time and moves a fixed number of bytes.
type flatCost struct {
	computeS, readBytes, hbmBytes float64
}

func (f flatCost) c() Cost {
	return Cost{ComputeS: f.computeS, ReadBytes: f.readBytes, HBMBytes: f.hbmBytes}
}
func (f flatCost) GEMMTile(m, n, k, tm, tn int, d hw.DType) Cost { return f.c() }
func (f flatCost) Reduce(elems, copies int, d hw.DType) Cost     { return f.c() }
func (f flatCost) Copy(elems int, d hw.DType) Cost               { return f.c() }

// testGPU has round numbers: 1 GHz (a cycle is 1 ns), 8 SMs.
func testGPU() hw.GPU {
	return hw.GPU{Name: "test", SMCount: 8, ClockHz: 1e9,
		L2BandwidthBytesPerS: 1e12, HBMBandwidthBytesPerS: 1e12}
}

func testConfig(mode SyncMode) Config {
	return Config{GPU: testGPU(), CTAsPerSM: 1, Mode: mode, PollIntervalS: 100e-9,
		BackoffMaxS: 1.6e-6, WakeLatencyS: 250e-9, ReadLatencyCycles: 20}
}

// twoRowAG is an all-gather + GEMM over 2 GPUs with 2 tile rows × 4 tile
// columns: row 0 reads the own shard, row 1 waits for ghost 1's shard.
func twoRowAG(t *testing.T, cost CostModel) *Kernel {
	k, err := Build(KernelConfig{Kind: AllGatherGEMM, M: 256, N: 512, K: 64, TileM: 128, TileN: 128,
		DType: hw.BF16, GPUs: 2}, cost)
	require.NoError(t, err)
	require.Len(t, k.CTAs, 8)
	return k
}

func run(t *testing.T, k *Kernel, c Config, script []Arrival) *Result {
	r, err := Simulate(context.Background(), k, c, script)
	require.NoError(t, err)
	return r
}

func TestSpinWaitReadsClosedForm(t *testing.T) {
	// 1 µs of compute per tile, no memory traffic, so nothing contends.
	k := twoRowAG(t, flatCost{computeS: 1e-6})
	for _, arriveS := range []float64{1e-6, 10e-6, 55.5e-6} {
		script := []Arrival{{TimeS: arriveS, SourceGPU: 1, Chunk: 1}}
		r := run(t, k, testConfig(SpinWait), script)
		// All 8 CTAs start at 0 on 8 SMs. A waiter polls at 0, 100, 200 ns,
		// ...; it sees the flag in round ceil(a/p) and issues that many reads
		// plus the first: reads = ceil(a/p) + 1 ≈ wait/p.
		p := 100e-9
		want := int64(math.Ceil(arriveS/p-1e-9)) + 1
		for i, c := range r.CTAs {
			if i < 4 {
				assert.Zero(t, c.Flags, "row 0 uses the own shard")
				continue
			}
			assert.Equal(t, want, c.Polls, "CTA %d", i)
			assert.InDelta(t, c.WaitS/p, float64(c.Polls), 1.5, "reads ≈ wait / poll interval")
			// seen at the first poll at or after the arrival, plus one read's latency
			assert.InDelta(t, float64(want-1)*p+20e-9, c.WaitS, 1e-12)
		}
		// kernel = last flag seen + 1 µs of compute
		assert.InDelta(t, float64(want-1)*p+20e-9+1e-6, r.KernelTimeS, 1e-12)
	}
}

func TestSyncMonReadsConstantPerWait(t *testing.T) {
	k := twoRowAG(t, flatCost{computeS: 1e-6})
	for _, arriveS := range []float64{1e-6, 10e-6, 100e-6} {
		r := run(t, k, testConfig(SyncMon), []Arrival{{TimeS: arriveS, SourceGPU: 1, Chunk: 1}})
		for _, c := range r.CTAs[4:] {
			// one read to register, one after the wake
			assert.EqualValues(t, 2, c.Polls)
			// woken wake latency after the write, then one read
			assert.InDelta(t, arriveS+250e-9+20e-9, c.WaitS, 1e-12)
		}
		assert.EqualValues(t, 8, r.PollingReads)
	}
}

func TestSpinYieldBacksOff(t *testing.T) {
	k := twoRowAG(t, flatCost{computeS: 1e-6})
	r := run(t, k, testConfig(SpinYield), []Arrival{{TimeS: 10e-6, SourceGPU: 1, Chunk: 1}})
	// Poll offsets 0, 100, 300, 700, 1500 ns, then every 1.6 µs: 3100, 4700,
	// 6300, 7900, 9500, 11100 ns. The flag (10 µs) is seen in round 10 at
	// 11.1 µs: 11 reads.
	for _, c := range r.CTAs[4:] {
		assert.EqualValues(t, 11, c.Polls)
		assert.InDelta(t, 11.1e-6+20e-9, c.WaitS, 1e-12)
	}
}

func TestKernelTimeGrowsWithInjectedDelay(t *testing.T) {
	k, err := Build(KernelConfig{Kind: AllGatherGEMM, M: 1024, N: 512, K: 256, TileM: 128, TileN: 128,
		DType: hw.BF16, GPUs: 8}, flatCost{computeS: 2e-6, readBytes: 1e5, hbmBytes: 2e4})
	require.NoError(t, err)
	base := Generator{StartS: 1e-6, IntervalS: 0}.Script(k)
	for _, mode := range SyncModes {
		prev := 0.0
		// Shards land at 1 µs; the own-shard row takes one 2 µs wave, so
		// up to about 1 µs of delay hides behind compute: use larger ones.
		for _, d := range []float64{0, 5e-6, 20e-6, 50e-6} {
			s := Perturbation{DelayS: d}.Apply(base, 8)
			r := run(t, k, testConfig(mode), s)
			assert.Greater(t, r.KernelTimeS, prev, "%s delay %v", mode, d)
			prev = r.KernelTimeS
		}
	}
}

func TestModesAgreeWithoutDelay(t *testing.T) {
	k, err := Build(KernelConfig{Kind: AllGatherGEMM, M: 1024, N: 1024, K: 256, TileM: 128, TileN: 128,
		DType: hw.BF16, GPUs: 8}, flatCost{computeS: 2e-6})
	require.NoError(t, err)
	// Shards land one every 1 µs, the rhythm of a ring of writes.
	script := Generator{StartS: 0.5e-6, IntervalS: 0}.Script(k)
	for i := range script {
		script[i].TimeS += float64(script[i].SourceGPU) * 1e-6
	}
	times := map[SyncMode]float64{}
	for _, mode := range SyncModes {
		times[mode] = run(t, k, testConfig(mode), script).KernelTimeS
	}
	// SyncMon sees a flag wake latency after its write, spin-wait within a
	// poll interval: they differ by at most the wake latency (250 ns > 100 ns).
	assert.InDelta(t, times[SpinWait], times[SyncMon], 250e-9+1e-12)
	// spin-yield may oversleep by one back-off cap at most
	assert.InDelta(t, times[SpinWait], times[SpinYield], 1.6e-6)
}

func TestWavesClosedForm(t *testing.T) {
	// 8 slots, 64 tiles, 1 µs each, no memory: 8 waves of 1 µs; the ghost
	// shard is there at 0 and a read costs nothing.
	k, err := Build(KernelConfig{Kind: AllGatherGEMM, M: 1024, N: 1024, K: 64, TileM: 128, TileN: 128,
		DType: hw.BF16, GPUs: 2}, flatCost{computeS: 1e-6})
	require.NoError(t, err)
	c := testConfig(SpinWait)
	c.ReadLatencyCycles = 0
	r := run(t, k, c, []Arrival{{TimeS: 0, SourceGPU: 1, Chunk: 1}})
	assert.InDelta(t, 8e-6, r.KernelTimeS, 1e-12)
	assert.InDelta(t, 0, r.SMIdleFraction, 1e-9)
	c.CTAsPerSM = 2 // twice the slots: 4 waves
	r = run(t, k, c, []Arrival{{TimeS: 0, SourceGPU: 1, Chunk: 1}})
	assert.InDelta(t, 4e-6, r.KernelTimeS, 1e-12)
}

func TestBandwidthSharedWithPolling(t *testing.T) {
	// Memory-bound tiles: 8 CTAs each read 1 MB through a 1 TB/s L2. Alone
	// they share it: 8 MB / 1 TB/s = 8 µs.
	k, err := Build(KernelConfig{Kind: AllGatherGEMM, M: 1024, N: 128, K: 64, TileM: 128, TileN: 128,
		DType: hw.BF16, GPUs: 2}, flatCost{readBytes: 1e6})
	require.NoError(t, err)
	c := testConfig(SpinWait)
	c.ReadLatencyCycles = 0
	r := run(t, k, c, []Arrival{{TimeS: 0, SourceGPU: 1, Chunk: 1}})
	assert.InDelta(t, 8e-6, r.KernelTimeS, 2e-9)
	assert.EqualValues(t, 8*1e6/SectorBytes+4, r.MemoryReads, "tile sectors + one flag read per waiter (rows 4..7)")

	// A 2-row kernel where 4 CTAs spin for 50 µs while 4 stream memory:
	// polling every 1 ns takes 4 × 32 B/ns = 128 GB/s of the 1 TB/s, so the
	// 4 MB of the first row take 4 MB / 872 GB/s instead of 4 µs.
	k2 := twoRowAG(t, flatCost{readBytes: 1e6})
	c.PollIntervalS = 1e-9
	r = run(t, k2, c, []Arrival{{TimeS: 50e-6, SourceGPU: 1, Chunk: 1}})
	firstRow := r.CTAs[0].EndS
	assert.InDelta(t, 4e6/(1e12-128e9), firstRow, 2e-9)
	c.Mode = SyncMon
	r = run(t, k2, c, []Arrival{{TimeS: 50e-6, SourceGPU: 1, Chunk: 1}})
	assert.InDelta(t, 4e-6, r.CTAs[0].EndS, 2e-9)
}

func TestReduceScatterWaitsForOwnTileAndPeers(t *testing.T) {
	k, err := Build(KernelConfig{Kind: GEMMReduceScatter, M: 512, N: 256, K: 128, TileM: 128, TileN: 128,
		DType: hw.BF16, GPUs: 4}, flatCost{computeS: 1e-6})
	require.NoError(t, err)
	// 4 blocks of 128 rows × 2 column tiles = 8 GEMM CTAs, then 2 reductions
	require.Len(t, k.CTAs, 10)
	assert.Equal(t, CTAReduce, k.CTAs[8].Kind)
	assert.Len(t, k.Expected, 3*2)
	r := run(t, k, testConfig(SpinWait), Generator{StartS: 0.2e-6}.Script(k))
	// Own block tiles are GEMM CTAs 6 and 7 (computed last), 8 slots: all
	// GEMMs run in wave one (0..1 µs); the reductions start at 1 µs when
	// slots free and find every flag set.
	for _, c := range r.CTAs[8:] {
		assert.GreaterOrEqual(t, c.StartS, 1e-6)
		assert.EqualValues(t, 4, c.Polls, "3 peers + the own tile, each seen on the first read")
	}
	assert.InDelta(t, 2e-6+20e-9, r.KernelTimeS, 1e-12)
}

func TestAllReduceTwoShot(t *testing.T) {
	k, err := Build(KernelConfig{Kind: AllReduce, M: 64, N: 256, TileM: 128, TileN: 128,
		DType: hw.BF16, GPUs: 4}, flatCost{computeS: 0.5e-6})
	require.NoError(t, err)
	// slice = 16 rows: chunks of 16×128, 2 per GPU; 2 reductions + 3 copies
	require.Len(t, k.CTAs, 5)
	assert.Len(t, k.Expected, 3*4)
	s := Generator{StartS: 1e-6, IntervalS: 1e-6}.Script(k)
	r := run(t, k, testConfig(SyncMon), s)
	// the last phase-two chunk (send order 3) lands at 4 µs, is seen 270 ns
	// later and copied in 0.5 µs
	assert.InDelta(t, 4e-6+270e-9+0.5e-6, r.KernelTimeS, 1e-12)
}

func TestScriptErrors(t *testing.T) {
	k := twoRowAG(t, flatCost{computeS: 1e-6})
	_, err := Simulate(context.Background(), k, testConfig(SpinWait), nil)
	var se *ScriptError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, []Signal{{Source: 1, Chunk: 1}}, se.Missing)
	assert.Contains(t, err.Error(), "wait forever")
	_, err = Simulate(context.Background(), k, testConfig(SpinWait),
		[]Arrival{{TimeS: 1e-6, SourceGPU: 1, Chunk: 1}, {TimeS: 1e-6, SourceGPU: 7, Chunk: 7}})
	require.ErrorAs(t, err, &se)
	assert.Contains(t, err.Error(), "row 1 (source 7, chunk 7)")
}

func TestInvariants(t *testing.T) {
	k, err := Build(KernelConfig{Kind: AllGatherGEMM, M: 2048, N: 1024, K: 512, TileM: 128, TileN: 128,
		DType: hw.BF16, GPUs: 16}, flatCost{computeS: 1.5e-6, readBytes: 3e5, hbmBytes: 5e4})
	require.NoError(t, err)
	base := Generator{StartS: 0.3e-6, IntervalS: 0}.Script(k)
	for seed := uint64(1); seed <= 5; seed++ {
		s := Perturbation{SkewS: 5e-6, JitterS: 1e-6, StragglerProbability: 0.2, StragglerDelayS: 10e-6, Seed: seed}.Apply(base, 16)
		for _, mode := range SyncModes {
			r := run(t, k, testConfig(mode), s)
			// Slots never hold two CTAs at once, CTAs launch in order.
			type span struct{ s, e float64 }
			bySlot := map[int][]span{}
			prevStart := 0.0
			for _, c := range r.CTAs {
				require.GreaterOrEqual(t, c.StartS, prevStart)
				prevStart = c.StartS
				require.GreaterOrEqual(t, c.WaitS, 0.0)
				require.GreaterOrEqual(t, c.ComputeS, 1.5e-6-1e-9, "a tile never beats its compute time")
				require.InDelta(t, c.EndS, c.StartS+c.WaitS+c.ComputeS, 1e-12)
				for _, o := range bySlot[c.Slot] {
					require.True(t, c.StartS >= o.e, "slot %d overlaps", c.Slot)
				}
				bySlot[c.Slot] = append(bySlot[c.Slot], span{c.StartS, c.EndS})
			}
			require.GreaterOrEqual(t, r.SMIdleFraction, 0.0)
			require.Less(t, r.SMIdleFraction, 1.0)
			// deterministic
			r2 := run(t, k, testConfig(mode), s)
			require.Equal(t, r, r2)
		}
	}
}
