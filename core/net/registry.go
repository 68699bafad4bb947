package net

import "fmt"

// algorithm is one (operation, algorithm) pair the engine serves: the
// builder of its program, or a chooser that picks another pair.
type algorithm struct {
	op  Op
	alg Algorithm
	// build makes the program of a request whose defaults are filled and
	// which validate accepted; it refuses what only this algorithm cannot
	// serve (a non-power-of-two rank count, unequal nodes).
	build func(c *Comms, col *Collective) (program, error)
	// chunks is the default of Collective.Chunks and chunkBytes for the
	// payload; nil is one piece.
	chunks func(bytes float64) (n int, size float64)
	// choose, instead of build, sets col.Algorithm to what the request runs
	// as (a registered pair) and may set what that choice achieves (NCCL's
	// tuner: the protocol efficiency, shape.choice and shape.delay).
	choose func(c *Comms, col *Collective, shape *checkedShape) error
}

// registry is every collective the engine runs, grouped by operation in
// the order of Ops, each operation's default algorithm first. Algorithms,
// Ops, the engine's checks and the spec's vocabulary
// (spec.CollectiveAlgorithms) derive from it.
//
// A new algorithm is a builder (a program type in its family's algo_*.go,
// or a new file) and a row here; then docs/SCENARIOS.md's collective section.
var registry = []algorithm{
	{op: AllReduce, alg: Ring, build: buildRing},
	{op: AllReduce, alg: Tree, build: buildDoubleTree, chunks: PipelineChunks},
	{op: AllReduce, alg: HalvingDoubling, build: buildHalvingDoubling},
	{op: AllReduce, alg: Direct, build: buildDirect},
	{op: AllReduce, alg: Hierarchical, build: buildHierarchical},
	{op: AllReduce, alg: NCCL, choose: tuneNCCL},
	{op: AllReduce, alg: OneShot, build: buildOneShot},
	{op: AllReduce, alg: Custom, choose: VLLMCustom.choose},
	{op: AllReduce, alg: CustomTRTLLM, choose: TRTLLMCustom.choose},
	{op: AllGather, alg: Ring, build: buildRing},
	{op: AllGather, alg: Direct, build: buildDirect},
	{op: AllGather, alg: NCCL, choose: tuneNCCL},
	{op: ReduceScatter, alg: Ring, build: buildRing},
	{op: ReduceScatter, alg: Direct, build: buildDirect},
	{op: ReduceScatter, alg: NCCL, choose: tuneNCCL},
	{op: AllToAll, alg: Direct, build: buildDirect},
	{op: Broadcast, alg: Ring, build: buildChain, chunks: PipelineChunks},
	{op: Broadcast, alg: Tree, build: buildRootedTree, chunks: PipelineChunks},
	{op: Reduce, alg: Ring, build: buildChain, chunks: PipelineChunks},
	{op: Reduce, alg: Tree, build: buildRootedTree, chunks: PipelineChunks},
	{op: SendRecv, alg: Direct, build: buildDirect},
	{op: SendRecv, alg: NCCL, choose: tuneSendRecv},
}

// Ops lists the operations in a fixed order.
func Ops() []Op {
	var ops []Op
	for i, a := range registry {
		if i == 0 || registry[i-1].op != a.op {
			ops = append(ops, a.op)
		}
	}
	return ops
}

// Algorithms lists what an operation supports; the first is its default.
func Algorithms(op Op) []Algorithm {
	var algs []Algorithm
	for _, a := range registry {
		if a.op == op {
			algs = append(algs, a.alg)
		}
	}
	return algs
}

// lookup finds the registry entry of op and alg ("" = the operation's
// default), or says why there is none. A chooser's name on an operation it
// does not cover is refused as such, whether or not the operation exists.
func lookup(op Op, alg Algorithm) (*algorithm, error) {
	known, chooser := false, false
	for i := range registry {
		a := &registry[i]
		if a.op == op && (a.alg == alg || alg == "") {
			return a, nil
		}
		known = known || a.op == op
		chooser = chooser || (a.alg == alg && a.choose != nil)
	}
	switch {
	case chooser:
		return nil, fmt.Errorf("%s does not support algorithm %q", op, alg)
	case !known:
		return nil, fmt.Errorf("unknown collective %q (have %v)", op, Ops())
	}
	return nil, fmt.Errorf("%s does not support algorithm %q (supports %v)", op, alg, Algorithms(op))
}
