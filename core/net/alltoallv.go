package net

import (
	"fmt"
	"math"

	"github.com/eidolon-sim/eidolon/core/sim"
)

// AllToAllV is an all-to-all with a size per (sender, receiver) pair, as a
// mixture-of-experts dispatch or combine sends each expert's tokens to the
// rank that holds it (NCCL's grouped ncclSend/ncclRecv, torch's
// all_to_all_single with split sizes).
type AllToAllV struct {
	// Ranks of the communicator.
	Ranks []int
	// Bytes[i·n+j] is what Ranks[i] sends to Ranks[j]; the diagonal stays
	// on the GPU and is not sent.
	Bytes []float64
	// Hierarchical sends a pair on different nodes in two hops, as DeepEP's
	// internode kernels do (DeepSeek-V3, arXiv 2412.19437, §3.2.2): over
	// the network to the GPU of the sender's local index on the receiver's
	// node (one aggregated transfer per sender and destination node), then
	// over NVLink to the receiver once that transfer has arrived. Pairs in
	// one node go directly. False sends every pair directly.
	Hierarchical bool
	// TopK and NodeLimit (hierarchical only) deduplicate the network hop
	// as DeepEP does: a token routed to several experts on one node
	// crosses the network once and the relay fans it out over NVLink (the
	// combine sums them on the relay before sending back). A token's k
	// experts fall on D = M·(1 − (1 − 1/M)^k) distinct nodes in
	// expectation, M = min(NodeLimit, nodes) (NodeLimit 0: the nodes the
	// communicator spans), so each sender-to-node transfer carries D/k of
	// its per-slot bytes. TopK 0 sends every routed copy.
	TopK, NodeLimit int
	// ProtocolEfficiency as in Collective (0 means 1). PathEfficiency
	// instead gives each flow its own route's (net.PathEfficiency): an
	// all-to-all's NVLink pairs and its network pairs are limited by
	// different links.
	ProtocolEfficiency float64
	PathEfficiency     bool
	// FixedS is what the kernels take beyond their flows, added once at
	// the end (DeepEP's low-latency kernels: DeepEPLowLatencyDispatchS,
	// DeepEPLowLatencyCombineS).
	FixedS float64
	Label  string
}

// DeepEP's low-latency kernels (decode) each take a fixed time beyond the
// bytes they move: the sender's FP8 cast and per-expert packing, the
// signalling of every (expert, rank) count, the receiver's wait for all of
// them and its unpacking into the experts' layout. Fitted on the dispatch
// and combine times of deepseek-ai/DeepEP docs/legacy.md ("Low-latency
// kernels with pure RDMA": H800 + CX7, 128 tokens, top-8, FP8 dispatch and
// BF16 combine) at EP 16 and 32, as each time less the direct
// all-to-all-v's on dgx-h800 nodes; EP 64 and 128 check it (core/net
// TestDirectAllToAllAgainstDeepEPLowLatency).
const (
	DeepEPLowLatencyDispatchS = 32.8e-6
	DeepEPLowLatencyCombineS  = 35.2e-6
)

// The expert-parallel all-to-all backends a serving engine runs, vLLM's
// --all2all-backend names: every pair sent directly; DeepEP's low-latency
// kernels (directly, each kernel's fixed time on top); its high-throughput
// (normal) kernels (across nodes in two hops: AllToAllV.Hierarchical); or
// SGLang's --deepep-mode auto: low-latency for decode-only iterations,
// high-throughput for those with a prompt.
const (
	A2ADirect         = "direct"
	A2ALowLatency     = "deepep_low_latency"
	A2AHighThroughput = "deepep_high_throughput"
	A2AAuto           = "deepep_auto"
)

// A2ABackends lists them.
func A2ABackends() []string { return []string{A2ADirect, A2ALowLatency, A2AHighThroughput, A2AAuto} }

// RelayChunks is how many pieces a hierarchical all-to-all's network
// transfer arrives in, one after another, each forwarded over NVLink as it
// lands: DeepEP's internode kernels forward tokens while later ones are
// still on the network (chunks of num_max_rdma_chunked_send_tokens tokens,
// csrc/kernels/internode.cu), so only the last piece's NVLink hop is not
// hidden behind the network. Eight pieces leave an eighth of it exposed. A
// piece is at least RelayPieceMinBytes: each pays the route's latency in
// series, which a 1 MiB piece's transfer (21 µs at 50 GB/s) dwarfs, where
// DeepEP keeps several smaller chunks in flight.
const (
	RelayChunks        = 8
	RelayPieceMinBytes = 1 << 20
)

// StartAllToAllV begins an all-to-all-v now; done runs when every pair's
// bytes have arrived. Every pair is a flow of its own on the fabric, so
// concurrent traffic and the routing's skew share links by max-min
// fairness: the most loaded sender, receiver or link sets the time.
func (c *Comms) StartAllToAllV(a AllToAllV, done func(Result)) error {
	n := len(a.Ranks)
	if len(a.Bytes) != n*n {
		return fmt.Errorf("all_to_all_v: %d ranks need %d pair sizes, got %d", n, n*n, len(a.Bytes))
	}
	for i, b := range a.Bytes {
		if !(b >= 0) {
			return fmt.Errorf("all_to_all_v: pair (%d, %d) size must be >= 0, got %v", i/n, i%n, b)
		}
	}
	eff := a.ProtocolEfficiency
	if eff == 0 {
		eff = 1
	}
	if !(eff > 0 && eff <= 1) {
		return fmt.Errorf("all_to_all_v: protocol efficiency must be in (0, 1], got %v", eff)
	}
	k := c.f.Kernel()
	dev := make([]int, n)
	for i, r := range a.Ranks {
		if r < 0 || r >= c.t.NumRanks() {
			return fmt.Errorf("all_to_all_v: rank %d out of range [0, %d)", r, c.t.NumRanks())
		}
		dev[i] = c.t.RankDevice(r)
	}
	res := Result{ID: -1, Start: k.Now(), Collective: Collective{Op: AllToAll, Ranks: a.Ranks, Label: a.Label, Algorithm: Direct}}
	pending := 1
	var failed error
	finish := SinkFunc(func(int) {
		pending--
		if pending != 0 {
			return
		}
		end := func() {
			res.End = k.Now()
			done(res)
		}
		if a.FixedS > 0 {
			k.After(sim.Seconds(a.FixedS), end)
			return
		}
		end()
	})
	started := false // sends from relays run in delivery callbacks
	pathEff := func(i, j int) float64 {
		if !a.PathEfficiency {
			return eff
		}
		path, err := c.t.Route(dev[i], dev[j])
		if err != nil {
			return eff // Send reports the missing route
		}
		return PathEfficiency(c.t, path)
	}
	send := func(i, j int, bytes float64, sink Sink) {
		if failed != nil {
			return
		}
		pending++
		res.Flows++
		wire := bytes / pathEff(i, j)
		res.WireBytes += wire
		if err := c.f.Send(dev[i], dev[j], wire, sink, 0); err != nil {
			failed = fmt.Errorf("all_to_all_v from rank %d to %d: %w", a.Ranks[i], a.Ranks[j], err)
			if started {
				k.Fail(failed)
			}
		}
	}
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			res.Collective.Bytes += a.Bytes[i*n+j]
		}
	}
	if !a.Hierarchical {
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				if b := a.Bytes[i*n+j]; i != j && b > 0 {
					send(i, j, b, finish)
				}
			}
		}
	} else {
		res.Collective.Algorithm = Hierarchical
		node := make([]int, n)
		local := make([]int, n)
		var members [][]int // node slot -> communicator indices, in rank order
		slot := map[int]int{}
		for i := range a.Ranks {
			nd := c.t.Devices[dev[i]].Node
			s, ok := slot[nd]
			if !ok {
				s = len(members)
				slot[nd] = s
				members = append(members, nil)
			}
			node[i], local[i] = s, len(members[s])
			members[s] = append(members[s], i)
		}
		share := 1.0
		if a.TopK > 0 {
			M := float64(len(members))
			if a.NodeLimit > 0 && float64(a.NodeLimit) < M {
				M = float64(a.NodeLimit)
			}
			k := float64(a.TopK)
			share = min(1, M*(1-math.Pow(1-1/M, k))/k)
		}
		for i := 0; i < n; i++ {
			for s, m := range members {
				if s == node[i] {
					for _, j := range m {
						if b := a.Bytes[i*n+j]; j != i && b > 0 {
							send(i, j, b, finish)
						}
					}
					continue
				}
				relay := m[local[i]%len(m)]
				var total float64
				for _, j := range m {
					total += a.Bytes[i*n+j]
				}
				if total <= 0 {
					continue
				}
				src, dsts := i, m
				pieces := int(min(RelayChunks, max(1, total*share/RelayPieceMinBytes)))
				// The pieces go one after another; each one's arrival
				// starts the next and forwards it over NVLink.
				var piece func(k int)
				piece = func(k int) {
					send(src, relay, total*share/float64(pieces), SinkFunc(func(int) {
						if k+1 < pieces {
							piece(k + 1)
						}
						for _, j := range dsts {
							if b := a.Bytes[src*n+j]; j != relay && b > 0 {
								send(relay, j, b/float64(pieces), finish)
							}
						}
						finish(0)
					}))
				}
				piece(0)
			}
		}
	}
	if failed != nil {
		return failed
	}
	started = true
	k.After(0, func() { finish(0) })
	return nil
}
