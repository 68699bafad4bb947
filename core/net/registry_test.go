package net

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/topo"
)

// Every row of the registry either builds a program or chooses another
// row; pairs are unique; operations are grouped (Ops lists each once); a
// chooser's choice is a registered row that builds.
func TestRegistryIsWellFormed(t *testing.T) {
	seen := map[[2]string]bool{}
	for _, a := range registry {
		key := [2]string{string(a.op), string(a.alg)}
		require.False(t, seen[key], "%v registered twice", key)
		seen[key] = true
		require.True(t, (a.build == nil) != (a.choose == nil), "%v needs exactly one of build and choose", key)
	}
	ops := Ops()
	require.Len(t, ops, 7)
	for i, op := range ops {
		for _, prev := range ops[:i] {
			require.NotEqual(t, prev, op, "rows of %s are not grouped", op)
		}
	}
	// NCCL chooses for the operations its tuner models, on a node where it
	// picks each of them, and for send_recv's one transfer; what it picks
	// runs as a registered row.
	tp, err := topo.Preset("dgx-h100", 1)
	require.NoError(t, err)
	c := NewComms(NewFlowNet(sim.New(), tp))
	for _, a := range registry {
		if a.choose == nil {
			continue
		}
		ranks := all(8)
		if a.op == SendRecv {
			ranks = all(2)
		}
		col := Collective{Op: a.op, Algorithm: a.alg, Bytes: 1 << 20, Ranks: ranks}
		var shape checkedShape
		require.NoError(t, a.choose(c, &col, &shape))
		b, err := lookup(col.Op, col.Algorithm)
		require.NoError(t, err)
		require.NotNil(t, b.build, "%s %s chose %s", a.op, a.alg, col.Algorithm)
		require.NotNil(t, shape.choice)
	}
}

func TestLookup(t *testing.T) {
	a, err := lookup(AllToAll, "")
	require.NoError(t, err)
	assert.Equal(t, Direct, a.alg, "the default is the operation's first row")
	a, err = lookup(Reduce, Tree)
	require.NoError(t, err)
	assert.Equal(t, Reduce, a.op)
	assert.Equal(t, Tree, a.alg)
	_, err = lookup("gather", Ring)
	assert.EqualError(t, err, `unknown collective "gather" (have [all_reduce all_gather reduce_scatter all_to_all broadcast reduce send_recv])`)
	_, err = lookup(Broadcast, HalvingDoubling)
	assert.EqualError(t, err, `broadcast does not support algorithm "halving_doubling" (supports [ring tree])`)
	_, err = lookup(Broadcast, NCCL)
	assert.EqualError(t, err, `broadcast does not support algorithm "nccl"`)
}

// defaults fills a request before validate sees it, and validate changes
// nothing. Chunks: 1 for rings, halving-doubling and direct; one per MiB,
// at most 64, for trees and chains (5 MiB → 5, 200 MiB → 64, 1 KiB → 1).
// Channels across two DGX H100 nodes: one per rail, min(8 NICs, 8 GPUs) = 8.
func TestDefaultsBeforeValidate(t *testing.T) {
	tp, err := topo.Preset("dgx-h100", 2)
	require.NoError(t, err)
	c := NewComms(NewFlowNet(sim.New(), tp))
	for _, tc := range []struct {
		op     Op
		alg    Algorithm
		bytes  float64
		chunks int
	}{
		{AllReduce, "", 5 << 20, 1},
		{AllReduce, Tree, 5 << 20, 5},
		{AllReduce, Tree, 200 << 20, 64},
		{Broadcast, Ring, 5 << 20, 5},
		{Reduce, Tree, 1 << 10, 1},
		{AllReduce, HalvingDoubling, 5 << 20, 1},
		{AllGather, Direct, 5 << 20, 1},
	} {
		col := Collective{Op: tc.op, Algorithm: tc.alg, Bytes: tc.bytes, Ranks: all(16)}
		a, err := lookup(col.Op, col.Algorithm)
		require.NoError(t, err)
		c.defaults(&col, a)
		assert.Equal(t, tc.chunks, col.Chunks, "%s %s %v", tc.op, tc.alg, tc.bytes)
		assert.Equal(t, 8, col.Channels)
		assert.Equal(t, 1.0, col.ProtocolEfficiency)
		assert.Equal(t, a.alg, col.Algorithm)
		before := col
		require.NoError(t, c.validate(&col))
		assert.Equal(t, before, col, "validate must not fill anything")
	}
	// Ranks out of range: defaults leave the channels for validate to refuse.
	col := Collective{Op: AllReduce, Bytes: 1, Ranks: []int{0, 16}}
	a, err := lookup(col.Op, col.Algorithm)
	require.NoError(t, err)
	c.defaults(&col, a)
	assert.Equal(t, 0, col.Channels)
	assert.EqualError(t, c.validate(&col), "rank 16 out of range [0, 16)")
}
