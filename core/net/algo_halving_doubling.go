package net

import (
	"fmt"
	"math/bits"
)

// Rabenseifner's all_reduce: recursive halving reduce-scatter, then
// recursive doubling all-gather, on a power-of-two number of ranks.

func buildHalvingDoubling(_ *Comms, col *Collective) (program, error) {
	n := len(col.Ranks)
	if n&(n-1) != 0 {
		return nil, fmt.Errorf("halving_doubling needs a power-of-two number of ranks, got %d", n)
	}
	return &hdProg{chunks: col.Chunks, n: n, log: bits.Len(uint(n)) - 1, bytes: col.Bytes / float64(col.Chunks)}, nil
}

// hdProg: recursive halving then recursive doubling with partner rank ^ d.
type hdProg struct {
	chunks, n, log int
	bytes          float64
}

func (p *hdProg) instances() int   { return p.chunks }
func (p *hdProg) groupSize() int   { return p.chunks }
func (p *hdProg) pipelined() bool  { return true }
func (p *hdProg) ops(int, int) int { return 2*p.log + 1 }
func (p *hdProg) wait(_, _, k int) int {
	if k == 0 {
		return 0
	}
	return 1
}
func (p *hdProg) sends(_, rank, k int, buf []msg) []msg {
	if k >= 2*p.log {
		return buf
	}
	var dist int
	var bytes float64
	if k < p.log { // halving: distances n/2, n/4, ..., 1; bytes S/2, S/4, ..., S/n
		dist = p.n >> (k + 1)
		bytes = p.bytes / float64(int(1)<<(k+1))
	} else { // doubling: distances 1, 2, ..., n/2; bytes S/n, ..., S/2
		j := k - p.log
		dist = 1 << j
		bytes = p.bytes / float64(int(1)<<(p.log-j))
	}
	return append(buf, msg{to: int32(rank ^ dist), op: int32(k + 1), bytes: bytes})
}
