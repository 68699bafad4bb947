package eidola

import (
	"fmt"

	"github.com/eidolon-sim/eidolon/core/hw"
)

// KernelKind names a fused compute-communication kernel.
type KernelKind string

const (
	// AllGatherGEMM: C = A·B where A (M×K) is sharded by rows over the GPUs
	// (M/P rows each). Every GPU writes its shard into every peer at launch;
	// a CTA computing an output tile waits for the shards covering its rows.
	AllGatherGEMM KernelKind = "allgather_gemm"
	// GEMMReduceScatter: every GPU computes a partial C (M×N) and row block g
	// (M/P rows) of it belongs to GPU g. Each computed tile of a peer's block
	// is written into that peer; the detailed GPU's own block is then reduced
	// by reduction CTAs that wait for the P-1 peer partials of their tile.
	GEMMReduceScatter KernelKind = "gemm_reducescatter"
	// AllReduce: a two-shot all-reduce of an M×N buffer written as
	// peer-to-peer writes and flags: every GPU writes slice g (M/P rows) of
	// its buffer into GPU g at launch; GPU g's reduction CTAs wait for the
	// P-1 partials of each chunk, reduce them and write the result into every
	// peer; gather CTAs (one per peer) wait for that peer's reduced chunks and
	// copy them from the receive buffer into the output.
	AllReduce KernelKind = "allreduce"
)

// KernelKinds lists every kernel kind in a fixed order.
var KernelKinds = []KernelKind{AllGatherGEMM, GEMMReduceScatter, AllReduce}

// KernelConfig describes the fused kernel as GPU 0, the detailed GPU, of a
// group of GPUs runs it. Shapes are the detailed GPU's local problem.
type KernelConfig struct {
	Kind KernelKind
	// M, N, K: the local GEMM is (M×K)·(K×N). AllReduce uses an M×N buffer
	// and ignores K.
	M, N, K int
	// TileM, TileN: the output tile one CTA computes. For GEMMReduceScatter
	// and AllReduce the tile height is min(TileM, M/GPUs), so a tile never
	// straddles two GPUs' blocks.
	TileM, TileN int
	DType        hw.DType
	// GPUs is the group size: the detailed GPU plus its ghosts.
	GPUs int
}

// Check reports what makes a config unusable, or nil.
func (c KernelConfig) Check() error {
	switch {
	case c.GPUs < 2:
		return fmt.Errorf("need at least 2 GPUs (1 ghost), got %d", c.GPUs)
	case c.M < 1 || c.N < 1 || (c.K < 1 && c.Kind != AllReduce):
		return fmt.Errorf("shape must be positive, got m=%d n=%d k=%d", c.M, c.N, c.K)
	case c.TileM < 1 || c.TileN < 1:
		return fmt.Errorf("tile must be positive, got %d×%d", c.TileM, c.TileN)
	case c.DType.Bytes() == 0:
		return fmt.Errorf("unknown dtype %q", c.DType)
	case c.M%c.GPUs != 0:
		return fmt.Errorf("m=%d must be a multiple of the GPU count %d (one row block per GPU)", c.M, c.GPUs)
	case c.M%c.TileM != 0 && c.Kind == AllGatherGEMM:
		return fmt.Errorf("m=%d must be a multiple of tile m=%d", c.M, c.TileM)
	case c.N%c.TileN != 0:
		return fmt.Errorf("n=%d must be a multiple of tile n=%d", c.N, c.TileN)
	}
	if c.Kind != AllGatherGEMM {
		block := c.M / c.GPUs
		tm := min(c.TileM, block)
		if block%tm != 0 {
			return fmt.Errorf("rows per GPU m/gpus=%d must be a multiple of tile m=%d (or smaller than it)", block, c.TileM)
		}
	}
	switch c.Kind {
	case AllGatherGEMM, GEMMReduceScatter, AllReduce:
		return nil
	}
	return fmt.Errorf("unknown kernel %q", c.Kind)
}

// Signal names one flag the detailed GPU waits for: chunk Chunk written by
// GPU Source. Source 0 is the detailed GPU itself (a flag set by one of its
// own CTAs).
type Signal struct {
	Source, Chunk int
}

// CTAKind is what a CTA does once its flags are set.
type CTAKind string

const (
	CTAGEMM   CTAKind = "gemm"   // computes an output tile
	CTAReduce CTAKind = "reduce" // sums P partial chunks
	CTACopy   CTAKind = "copy"   // copies received chunks into the output
)

// CTA is one thread block of the kernel, in launch order.
type CTA struct {
	Kind CTAKind
	// Remote are the flags written by peers this CTA waits for, in the
	// order the kernel checks them.
	Remote []Signal
	// Local are the CTAs (indices) whose completion this CTA waits for.
	Local []int
	// Cost prices the work after the wait.
	Cost Cost
	// remoteIdx[i] is the position of Remote[i] in Kernel.Expected.
	remoteIdx []int32
}

// Kernel is a fused kernel compiled for the detailed GPU: its CTAs and every
// remote signal it expects, with the bytes each carries.
type Kernel struct {
	Config KernelConfig
	CTAs   []CTA
	// Expected lists every remote signal a script must supply, sorted by
	// (source, chunk), with the bytes each write carries.
	Expected      []Signal
	ExpectedBytes []float64
	// SendOrder[i] is the position of Expected[i] in its source's own send
	// order (0 = the first write that source makes to the detailed GPU).
	SendOrder []int
	// Sends are the writes this GPU makes into its peers. Every GPU of the
	// group runs the same kernel in its own view, so these also describe
	// what each ghost sends: the receiver sees Sends[i] as the signal
	// (source P-Dest, Chunk).
	Sends []Send
}

// Send is one peer-to-peer write (data, then flag) the GPU makes.
type Send struct {
	// After is the CTA whose completion issues the write; -1 = at launch.
	After int
	// Dest is the peer as an offset from this GPU: GPU (self+Dest) mod P.
	Dest int
	// Chunk is the chunk id in the receiver's numbering.
	Chunk int
	Bytes float64
}

// Build compiles a kernel config into CTAs priced by costs.
func Build(c KernelConfig, costs CostModel) (*Kernel, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	k := &Kernel{Config: c}
	switch c.Kind {
	case AllGatherGEMM:
		k.buildAllGatherGEMM(costs)
	case GEMMReduceScatter:
		k.buildGEMMReduceScatter(costs)
	case AllReduce:
		k.buildAllReduce(costs)
	}
	// CTAs of one tile row share their Remote slice; index each slice once.
	seen := map[*Signal][]int32{}
	for i := range k.CTAs {
		cta := &k.CTAs[i]
		if len(cta.Remote) == 0 {
			continue
		}
		if idx, ok := seen[&cta.Remote[0]]; ok && len(idx) == len(cta.Remote) {
			cta.remoteIdx = idx
			continue
		}
		cta.remoteIdx = make([]int32, len(cta.Remote))
		for j, s := range cta.Remote {
			x, _ := k.signalIndex(s)
			cta.remoteIdx[j] = int32(x)
		}
		seen[&cta.Remote[0]] = cta.remoteIdx
	}
	return k, nil
}

func (k *Kernel) expect(s Signal, bytes float64, order int) {
	k.Expected = append(k.Expected, s)
	k.ExpectedBytes = append(k.ExpectedBytes, bytes)
	k.SendOrder = append(k.SendOrder, order)
}

// blockRows is M/P, the rows of one GPU's shard or block.
func (c KernelConfig) blockRows() int { return c.M / c.GPUs }

// chunkRows is the tile height of kernels whose tiles must not straddle blocks.
func (c KernelConfig) chunkRows() int { return min(c.TileM, c.blockRows()) }

// ChunksPerBlock is the number of chunks (tiles) in one GPU's block of a
// GEMMReduceScatter or AllReduce kernel; AllGatherGEMM has one chunk per GPU.
func (c KernelConfig) ChunksPerBlock() int {
	if c.Kind == AllGatherGEMM {
		return 1
	}
	return c.blockRows() / c.chunkRows() * (c.N / c.TileN)
}

// buildAllGatherGEMM: chunk g is GPU g's shard of A. Tiles run row-major from
// the detailed GPU's own shard (rows 0..M/P-1), the order in which fused
// all-gather GEMMs consume shards (own first, then by arrival).
func (k *Kernel) buildAllGatherGEMM(costs CostModel) {
	c := k.Config
	block := c.blockRows()
	shardBytes := float64(block) * float64(c.K) * c.DType.Bytes()
	for g := 1; g < c.GPUs; g++ {
		k.expect(Signal{Source: g, Chunk: g}, shardBytes, 0)
		// my shard lands in peer g as chunk P-g (its view of me)
		k.Sends = append(k.Sends, Send{After: -1, Dest: g, Chunk: c.GPUs - g, Bytes: shardBytes})
	}
	cost := costs.GEMMTile(c.M, c.N, c.K, c.TileM, c.TileN, c.DType)
	for i := 0; i < c.M/c.TileM; i++ {
		first, last := i*c.TileM/block, ((i+1)*c.TileM-1)/block
		var needs []Signal
		for g := first; g <= last; g++ {
			if g != 0 {
				needs = append(needs, Signal{Source: g, Chunk: g})
			}
		}
		for j := 0; j < c.N/c.TileN; j++ {
			k.CTAs = append(k.CTAs, CTA{Kind: CTAGEMM, Remote: needs, Cost: cost})
		}
	}
}

// RSComputeOrder is the order in which GPU g of a GEMMReduceScatter kernel
// computes row blocks: g+1, g+2, ..., g+P-1 and its own block g last, so that
// at any moment the GPUs write into different peers and the own block (which
// waits for everyone) comes last.
func RSComputeOrder(g, gpus int) []int {
	out := make([]int, gpus)
	for i := range out {
		out[i] = (g + 1 + i) % gpus
	}
	return out
}

// buildGEMMReduceScatter: GEMM CTAs for every tile in RSComputeOrder(0), then
// one reduction CTA per chunk (tile) of the own block. Chunk t of the own
// block is global tile t (block 0 comes first in row-major order); peer g
// writes its partial of chunk t after computing it.
func (k *Kernel) buildGEMMReduceScatter(costs CostModel) {
	c := k.Config
	tm, chunks := c.chunkRows(), c.ChunksPerBlock()
	tileBytes := float64(tm*c.TileN) * c.DType.Bytes()
	// A peer computes my block at position (P-1-g) of its order, so its
	// writes to me are chunks 0..chunks-1 in order.
	for g := 1; g < c.GPUs; g++ {
		for t := 0; t < chunks; t++ {
			k.expect(Signal{Source: g, Chunk: t}, tileBytes, t)
		}
	}
	gemm := costs.GEMMTile(c.M, c.N, c.K, tm, c.TileN, c.DType)
	ownTile := make([]int, chunks)
	for _, b := range RSComputeOrder(0, c.GPUs) {
		for t := 0; t < chunks; t++ {
			if b == 0 {
				ownTile[t] = len(k.CTAs)
			} else {
				k.Sends = append(k.Sends, Send{After: len(k.CTAs), Dest: b, Chunk: t, Bytes: tileBytes})
			}
			k.CTAs = append(k.CTAs, CTA{Kind: CTAGEMM, Cost: gemm})
		}
	}
	reduce := costs.Reduce(tm*c.TileN, c.GPUs, c.DType)
	for t := 0; t < chunks; t++ {
		needs := make([]Signal, 0, c.GPUs-1)
		for g := 1; g < c.GPUs; g++ {
			needs = append(needs, Signal{Source: g, Chunk: t})
		}
		k.CTAs = append(k.CTAs, CTA{Kind: CTAReduce, Remote: needs, Local: []int{ownTile[t]}, Cost: reduce})
	}
}

// buildAllReduce: chunk ids are global chunk indices of the buffer, slice
// major: GPU g's slice holds chunks g·C .. g·C+C-1. Phase one: peers write
// their partials of my chunks 0..C-1; phase two: peer g writes its reduced
// chunks g·C+t.
func (k *Kernel) buildAllReduce(costs CostModel) {
	c := k.Config
	tm, chunks := c.chunkRows(), c.ChunksPerBlock()
	elems := tm * c.TileN
	chunkBytes := float64(elems) * c.DType.Bytes()
	for g := 1; g < c.GPUs; g++ {
		for t := 0; t < chunks; t++ {
			k.expect(Signal{Source: g, Chunk: t}, chunkBytes, t)
		}
		for t := 0; t < chunks; t++ {
			k.expect(Signal{Source: g, Chunk: g*chunks + t}, chunkBytes, chunks+t)
		}
	}
	for d := 1; d < c.GPUs; d++ {
		for t := 0; t < chunks; t++ {
			k.Sends = append(k.Sends, Send{After: -1, Dest: d, Chunk: t, Bytes: chunkBytes})
		}
	}
	reduce := costs.Reduce(elems, c.GPUs, c.DType)
	for t := 0; t < chunks; t++ {
		needs := make([]Signal, 0, c.GPUs-1)
		for g := 1; g < c.GPUs; g++ {
			needs = append(needs, Signal{Source: g, Chunk: t})
		}
		for d := 1; d < c.GPUs; d++ {
			k.Sends = append(k.Sends, Send{After: len(k.CTAs), Dest: d, Chunk: (c.GPUs-d)*chunks + t, Bytes: chunkBytes})
		}
		k.CTAs = append(k.CTAs, CTA{Kind: CTAReduce, Remote: needs, Cost: reduce})
	}
	copyCost := costs.Copy(elems*chunks, c.DType)
	for g := 1; g < c.GPUs; g++ {
		needs := make([]Signal, chunks)
		for t := range needs {
			needs[t] = Signal{Source: g, Chunk: g*chunks + t}
		}
		k.CTAs = append(k.CTAs, CTA{Kind: CTACopy, Remote: needs, Cost: copyCost})
	}
}
