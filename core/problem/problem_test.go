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
