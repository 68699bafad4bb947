package problem

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// Under moves every path under the prefix (a pathless problem to the
// prefix itself), keeps Allowed, and leaves other errors alone.
func TestUnder(t *testing.T) {
	var p Problems
	p.Addf("faults.links[0].src", "no device named %q", "n0.gpu9")
	p.OneOf("gpu", "h10", []string{"h100"})
	p.Addf("", "no base run")
	err := Under("training", p.Err())
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, []string{"training.faults.links[0].src", "training.gpu", "training"},
		[]string{e.Problems[0].Path, e.Problems[1].Path, e.Problems[2].Path})
	require.Equal(t, `one of ["h100"]`, e.Problems[1].Allowed)
	require.Equal(t, "faults.links[0].src", p.List()[0].Path, "the original is not changed")
	plain := errors.New("boom")
	require.Equal(t, plain, Under("training", plain))
	require.Nil(t, Of("x", nil))
	require.Equal(t, "x.y: bad", Of("x", []Problem{{Path: "y", Message: "bad"}}).(*Error).Problems[0].String())
}

// What a researcher types for a preset finds it: a typo by edit distance,
// a name written with other separators or case, and a short name that is
// a word of one or several presets (which the edit distance alone had
// answered with the wrong part: "h100" → "h200").
func TestSuggest(t *testing.T) {
	gpus := []string{"a100-40gb", "a100-80gb-sxm", "h100-sxm", "h100-pcie", "h200", "b200", "gb200", "l40s"}
	for s, want := range map[string][]string{
		"latncy_s":   {"latency_s"},
		"zzzzzzzz":   nil,
		"h100":       {"h100-sxm", "h100-pcie"},
		"H100":       {"h100-sxm", "h100-pcie"},
		"a100":       {"a100-40gb", "a100-80gb-sxm"},
		"h100_sxm":   {"h100-sxm"},
		"h100-sxm5":  {"h100-sxm"},
		"gb":         nil,
		"llama-2-7b": {"llama2-7b"},
		"p4d":        {"aws-p4d"},
	} {
		c := append(gpus, "latency_s", "bandwidth_bytes_per_s", "llama2-7b", "aws-p4d", "ring", "tree")
		require.Equal(t, want, Suggest(s, c), s)
	}
	require.Equal(t, ` (did you mean one of "h100-sxm", "h100-pcie"?)`, DidYouMean("h100", gpus))
	require.Equal(t, ` (did you mean "h200"?)`, DidYouMean("h20O", gpus))
	require.Equal(t, "", DidYouMean("zzzzzzzz", gpus))
}
