package net

// The direct family: every rank sends its share to every other rank at
// once (all_to_all, all_gather, reduce_scatter; all_reduce as a direct
// reduce-scatter then a direct all-gather), and send_recv's one transfer.
// (all_to_all_v, a size per pair, is StartAllToAllV in alltoallv.go.)

// buildDirect: one phase (two for all_reduce) of Bytes/(chunks·n) to each
// peer; send_recv is a one-hop chain from Ranks[0] to Ranks[1].
func buildDirect(_ *Comms, col *Collective) (program, error) {
	n := len(col.Ranks)
	per := col.Bytes / float64(col.Chunks)
	phases := 1
	if col.Op == AllReduce {
		phases = 2
	}
	if col.Op == SendRecv {
		return &treeProg{chunks: col.Chunks, bytes: per, last: per, trees: []tree{chain([]int{0, 1}, n)}, down: true}, nil
	}
	return &directProg{chunks: col.Chunks, n: n, phases: phases, bytes: per / float64(n)}, nil
}

// directProg: in each phase every rank sends `bytes` to every other rank.
type directProg struct {
	chunks, n, phases int
	bytes             float64
}

func (p *directProg) instances() int   { return p.chunks }
func (p *directProg) groupSize() int   { return p.chunks }
func (p *directProg) pipelined() bool  { return false } // one message per peer per phase
func (p *directProg) ops(int, int) int { return p.phases + 1 }
func (p *directProg) wait(_, _, k int) int {
	if k == 0 {
		return 0
	}
	return p.n - 1
}
func (p *directProg) sends(_, rank, k int, buf []msg) []msg {
	if k >= p.phases {
		return buf
	}
	for j := 1; j < p.n; j++ {
		buf = append(buf, msg{to: int32((rank + j) % p.n), op: int32(k + 1), bytes: p.bytes})
	}
	return buf
}
