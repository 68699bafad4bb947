package seedflood

// Message sizes, in bytes, as they would be sent on the wire.
const (
	// SeedMessageBytes is one SeedFlood message: origin client id (uint32, 4)
	// + step (uint32, 4) + perturbation seed (uint64, 8) + projected-gradient
	// scalar (float32, 4). Origin and step let a client drop duplicates and
	// pick the SubCGE epoch; the seed rebuilds z. It does not depend on the
	// model size.
	SeedMessageBytes = 4 + 4 + 8 + 4
	// ParamBytes is one float32 parameter, as gossip methods send them.
	ParamBytes = 4
	// SparseEntryBytes is one top-k entry: index (uint32) + value (float32).
	SparseEntryBytes = 4 + 4
)

// ModelMessageBytes is a whole-model gossip message (DSGD, DZSGD).
func ModelMessageBytes(params int) int64 { return int64(params) * ParamBytes }

// QuantizedMessageBytes is a QSGD-quantized vector of d entries: its norm
// (float32) plus a sign bit and `bits` level bits per entry, packed.
func QuantizedMessageBytes(d, bits int) int64 { return 4 + (int64(d)*int64(bits+1)+7)/8 }

// TopKMessageBytes is a ChocoSGD message carrying k (index, value) pairs.
func TopKMessageBytes(k int) int64 { return int64(k) * SparseEntryBytes }

// Flood is the outcome of flooding one message from each origin over a graph
// in synchronous rounds: in round h every client that first received the
// message in round h−1 forwards it once to each neighbor it did not get it
// from; a client that already holds the message drops the copy. The protocol
// depends only on the graph, not on the message, so it is run once per
// origin and reused for every (seed, scalar) message that origin emits.
type Flood struct {
	// Arrival[o][c] is the round in which c first receives o's message
	// (0 for c = o): its hop distance.
	Arrival [][]int
	// Receipts[o][c] counts first receipts (1 for every c ≠ o when connected).
	Receipts [][]int
	// Duplicates[o] counts copies dropped because the receiver already had it.
	Duplicates []int
	// Transmissions[o] counts sends of o's message over directed edges.
	Transmissions []int
	// Eccentricity[c] is the largest Arrival[o][c] over origins: when every
	// message emitted in a step has reached c.
	Eccentricity []int
}

// FloodGraph runs the flooding protocol from every origin.
func FloodGraph(g *Graph) *Flood {
	f, _ := FloodGraphCanceled(g, nil)
	return f
}

// FloodGraphCanceled is FloodGraph checking canceled (which may be nil)
// before each origin: on a dense graph of thousands of clients the protocol
// takes minutes (each origin's flood visits every directed edge).
func FloodGraphCanceled(g *Graph, canceled func() error) (*Flood, error) {
	n := g.NumNodes()
	f := &Flood{Arrival: make([][]int, n), Receipts: make([][]int, n), Duplicates: make([]int, n), Transmissions: make([]int, n), Eccentricity: make([]int, n)}
	for o := 0; o < n; o++ {
		if canceled != nil {
			if err := canceled(); err != nil {
				return nil, err
			}
		}
		arrival := make([]int, n)
		receipts := make([]int, n)
		for i := range arrival {
			arrival[i] = -1
		}
		arrival[o] = 0
		// from[c] marks the neighbors that sent c the message in the round c got it.
		from := make([][]int, n)
		frontier := []int{o}
		for round := 1; len(frontier) > 0; round++ {
			var next []int
			for _, u := range frontier {
				for _, v := range g.Neighbors(u) {
					if contains(from[u], v) {
						continue
					}
					f.Transmissions[o]++
					switch {
					case arrival[v] < 0:
						arrival[v] = round
						receipts[v]++
						from[v] = append(from[v], u)
						next = append(next, v)
					case arrival[v] == round:
						from[v] = append(from[v], u) // a simultaneous copy: dropped, and not sent back
						f.Duplicates[o]++
					default:
						f.Duplicates[o]++
					}
				}
			}
			frontier = next
		}
		f.Arrival[o], f.Receipts[o] = arrival, receipts
		for c, a := range arrival {
			f.Eccentricity[c] = max(f.Eccentricity[c], a)
		}
	}
	return f, nil
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// FloodStepBytes is the traffic of one SeedFlood step: every client emits q
// messages and each crosses Transmissions[o] directed edges.
func FloodStepBytes(f *Flood, q int) int64 {
	var sum int64
	for _, t := range f.Transmissions {
		sum += int64(t) * int64(q) * SeedMessageBytes
	}
	return sum
}

// GossipStepBytes is the traffic of one gossip step: every client sends one
// message of msgBytes to each neighbor.
func GossipStepBytes(g *Graph, msgBytes int64) int64 {
	return 2 * int64(g.NumEdges()) * msgBytes
}
