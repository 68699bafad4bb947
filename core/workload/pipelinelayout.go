package workload

import (
	"fmt"

	"github.com/eidolon-sim/eidolon/core/model"
)

// checkLayout reports what Megatron-Core refuses in a layout of pp stages
// for a model of layers layers and mtp MTP layers (validate_layer_layout),
// and what is not modelled: an MTP layer outside the loss's chunk, an empty
// chunk. It returns the virtual stages the layout implies.
func checkLayout(chunks []model.LayoutChunk, pp, layers, mtp int) (vpp int, err error) {
	n := len(chunks)
	if n%pp != 0 {
		return 0, fmt.Errorf("has %d chunks, not a multiple of pp (%d)", n, pp)
	}
	var embeddings, logits, ts, ms int
	for i, c := range chunks {
		if c.Embedding {
			embeddings++
			if i != 0 {
				return 0, fmt.Errorf("places the embedding (E) in chunk %d: it must open the first", i)
			}
		}
		if c.Loss {
			logits++
			if i != n-1 {
				return 0, fmt.Errorf("places the loss (L) in chunk %d: it must close the last", i)
			}
		}
		if c.MTP > 0 && !c.Loss {
			return 0, fmt.Errorf("places MTP layers (m) in chunk %d without the loss: only MTP layers in the loss's chunk are modelled", i)
		}
		if c.Layers == 0 && c.MTP == 0 && !c.Embedding && !c.Loss {
			return 0, fmt.Errorf("has an empty chunk (%d)", i)
		}
		ts += c.Layers
		ms += c.MTP
	}
	switch {
	case embeddings != 1 || logits != 1:
		return 0, fmt.Errorf("needs the embedding (E) and the loss (L) once each, got %d and %d", embeddings, logits)
	case ts != layers:
		return 0, fmt.Errorf("has %d transformer layers (t), the model %d", ts, layers)
	case ms != mtp:
		return 0, fmt.Errorf("has %d MTP layers (m), the model %d", ms, mtp)
	}
	return n / pp, nil
}
