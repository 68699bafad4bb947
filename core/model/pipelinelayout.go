package model

import (
	"fmt"
	"strconv"
	"strings"
)

// Megatron-Core's --pipeline-model-parallel-layout: the model's layers
// chunk by chunk, chunks separated by "|", in the order of the interleaved
// schedule's chunks (chunk c on stage c mod pp): "E" the embedding, "t" a
// transformer (decoder) layer, "m" a multi-token-prediction layer, "L" the
// output layer and its loss; "x*n" repeats a character and "(...)*n" a
// group, commas are cosmetic (pipeline_parallel_layer_layout.py
// parse_str_to_list). "Et|(tt|)*30mL" is DeepSeek-V3's H100 recipe on 16
// stages of 2 chunks.

// LayoutChunk is one chunk of a pipeline layout: its transformer and MTP
// layers, and whether it holds the embedding and the loss.
type LayoutChunk struct {
	Layers, MTP     int
	Embedding, Loss bool
}

// maxLayoutChars bounds a layout's expansion, and MaxLayoutInput the string
// itself: a spec may not make it allocate or work without limit.
const (
	maxLayoutChars = 1 << 16
	MaxLayoutInput = 4096
)

// ParsePipelineLayout expands and parses a layout string into its chunks.
func ParsePipelineLayout(s string) ([]LayoutChunk, error) {
	if len(s) > MaxLayoutInput {
		return nil, fmt.Errorf("is %d characters, at most %d", len(s), MaxLayoutInput)
	}
	x := layoutExpander{s: strings.ReplaceAll(s, ",", "")}
	s, err := x.sequence()
	if err == nil && x.at < len(x.s) {
		err = fmt.Errorf("has an unmatched %q at %d", x.s[x.at], x.at)
	}
	if err != nil {
		return nil, err
	}
	var out []LayoutChunk
	for _, stage := range strings.Split(s, "|") {
		var c LayoutChunk
		for i, r := range stage {
			switch r {
			case 'E':
				if i != 0 {
					return nil, fmt.Errorf("has the embedding (E) after a layer in chunk %d: it must open its chunk", len(out))
				}
				c.Embedding = true
			case 't':
				if c.MTP > 0 {
					return nil, fmt.Errorf("has a transformer layer (t) after an MTP layer (m) in chunk %d: MTP layers follow the model's layers", len(out))
				}
				c.Layers++
			case 'm':
				c.MTP++
			case 'L':
				if i != len(stage)-1 {
					return nil, fmt.Errorf("has a layer after the loss (L) in chunk %d: it must close its chunk", len(out))
				}
				c.Loss = true
			default:
				return nil, fmt.Errorf("has %q: the characters are E (embedding), t (transformer layer), m (MTP layer), L (loss), with x*n, (...)*n and |", r)
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// layoutExpander expands repetitions by recursive descent: a sequence of
// units, each a character or a parenthesised sequence, optionally followed
// by "*n".
type layoutExpander struct {
	s  string
	at int
}

// sequence expands units up to the end or a closing parenthesis.
func (x *layoutExpander) sequence() (string, error) {
	var b strings.Builder
	for x.at < len(x.s) && x.s[x.at] != ')' {
		unit := x.s[x.at : x.at+1]
		x.at++
		if unit == "(" {
			inner, err := x.sequence()
			if err != nil {
				return "", err
			}
			if x.at == len(x.s) {
				return "", fmt.Errorf("has an unclosed \"(\"")
			}
			x.at++
			unit = inner
		}
		n := 1
		if x.at < len(x.s) && x.s[x.at] == '*' {
			x.at++
			start := x.at
			for x.at < len(x.s) && x.s[x.at] >= '0' && x.s[x.at] <= '9' {
				x.at++
			}
			if start == x.at {
				return "", fmt.Errorf("has \"*\" without a count at %d", start)
			}
			var err error
			if n, err = strconv.Atoi(x.s[start:x.at]); err != nil {
				n = maxLayoutChars + 1 // out of range
			}
		}
		if n > maxLayoutChars || b.Len()+len(unit)*n > maxLayoutChars {
			return "", fmt.Errorf("repeats %q %d times: at most %d characters expanded", unit, n, maxLayoutChars)
		}
		b.WriteString(strings.Repeat(unit, n))
	}
	return b.String(), nil
}
