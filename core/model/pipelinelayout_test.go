package model

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// DeepSeek-V3's Megatron-Core layout expands to its 32 chunks: the
// embedding and one layer, thirty chunks of two, the MTP layer and the
// loss; groups nest, commas are cosmetic, and what a spec could make
// expand without limit is refused.
func TestParsePipelineLayout(t *testing.T) {
	chunks, err := ParsePipelineLayout("Et|(tt|)*30mL")
	require.NoError(t, err)
	require.Len(t, chunks, 32)
	require.Equal(t, LayoutChunk{Layers: 1, Embedding: true}, chunks[0])
	for _, c := range chunks[1:31] {
		require.Equal(t, LayoutChunk{Layers: 2}, c)
	}
	require.Equal(t, LayoutChunk{MTP: 1, Loss: true}, chunks[31])

	nested, err := ParsePipelineLayout("E,t*3|((t|)*2t*2|)*2,L")
	require.NoError(t, err)
	layers := make([]int, len(nested))
	for i, c := range nested {
		layers[i] = c.Layers
	}
	require.Equal(t, []int{3, 1, 1, 2, 1, 1, 2, 0}, layers)
	require.True(t, nested[len(nested)-1].Loss)

	for _, bad := range []struct{ layout, says string }{
		{"Et|tx|L", "'x'"},
		{"Et|t*99999999|L", "at most"},
		{"E(t|)*60000L", "at most"},
		{strings.Repeat("(", 12) + "t" + strings.Repeat("|)*9", 12), "at most"},
		{"Et|t*99999999999999999999999|L", "at most"},
		{strings.Repeat("t", 5000), "at most 4096"},
		{"E(t|t*2", "unclosed"},
		{"Et)|t*2L", "unmatched"},
		{"Et|t*|L", "without a count"},
		{"tE|t|tL", "must open its chunk"},
		{"Et|t|Lt", "must close its chunk"},
		{"Et|t|mtL", "after an MTP layer"},
	} {
		_, err := ParsePipelineLayout(bad.layout)
		require.ErrorContains(t, err, bad.says, bad.layout)
	}
}

// FuzzParsePipelineLayout: any string parses or is refused with an error,
// quickly, and what parses has at most maxLayoutChars layers.
func FuzzParsePipelineLayout(f *testing.F) {
	for _, s := range []string{"Et|(tt|)*30mL", "E,t*3|((t|)*2t*2|)*2,L", "((t)*9)*9)*", "(|", "t*0|L"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		chunks, err := ParsePipelineLayout(s)
		if err != nil {
			return
		}
		n := 0
		for _, c := range chunks {
			n += c.Layers + c.MTP
		}
		require.LessOrEqual(t, n, maxLayoutChars)
	})
}
