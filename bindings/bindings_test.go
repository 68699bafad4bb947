package bindings

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRunSelftest(t *testing.T) {
	h, err := Start(`{"kind":"selftest","iterations":1000,"seed":5}`, 0)
	require.NoError(t, err)
	for {
		done, err := Wait(h, 100)
		require.NoError(t, err)
		if done {
			break
		}
	}
	p, err := Progress(h)
	require.NoError(t, err)
	require.Equal(t, 1.0, p)
	b, err := Result(h)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(b), "EIDOLON1"))
	_, err = Result(h)
	require.ErrorContains(t, err, "no run with handle")
}

func TestErrorsAreClassified(t *testing.T) {
	_, err := Start(`{"kind":"selftest","iteratons":5,"seed":"x"}`, 0)
	require.ErrorContains(t, err, "SpecError: invalid spec, 2 problems")
	// The text, then the problems as JSON after ProblemsMark.
	text, js, ok := strings.Cut(err.Error(), ProblemsMark)
	require.True(t, ok)
	require.NotContains(t, text, ProblemsMark)
	require.Equal(t, `[{"path":"iteratons","message":"unknown field (did you mean \"iterations\"?); `+
		`allowed here: fail, iterations, kind, max_events, max_memory_bytes, name, panic, seed",`+
		`"allowed":"a field of [\"fail\", \"iterations\", \"kind\", \"max_events\", \"max_memory_bytes\", \"name\", \"panic\", \"seed\"]"},`+
		`{"path":"seed","message":"must be an integer, got a string","allowed":""}]`, js)
	_, err = Start(`{"kind":"selftest","iterations":-1}`, 0)
	require.EqualError(t, err, "SpecError: invalid spec: iterations: must be in [1, 1e15], got -1"+ProblemsMark+
		`[{"path":"iterations","message":"must be in [1, 1e15], got -1","allowed":"[1, 1e15]"}]`)
	// A range problem beside a type error keeps its allowed values.
	_, err = Start(`{"kind":"selftest","iterations":-1,"seed":"x"}`, 0)
	require.ErrorContains(t, err, `{"path":"iterations","message":"must be in [1, 1e15], got -1","allowed":"[1, 1e15]"}`)
	h, err := Start(`{"kind":"selftest","fail":"partitioned"}`, 0)
	require.NoError(t, err)
	_, err = Result(h)
	require.EqualError(t, err, "SimulationError: partitioned")
	h, err = Start(`{"kind":"selftest","panic":true}`, 0)
	require.NoError(t, err)
	_, err = Result(h)
	require.ErrorContains(t, err, "InternalError: panic: selftest")
	require.ErrorContains(t, ForcePanic(), "InternalError: panic: assignment to entry in nil map")
}

func TestCancel(t *testing.T) {
	h, err := Start(`{"kind":"selftest","iterations":1000000000000}`, 0)
	require.NoError(t, err)
	require.NoError(t, Cancel(h))
	_, err = Result(h)
	require.EqualError(t, err, "Canceled: run interrupted")
}

func TestValidateAndCatalogs(t *testing.T) {
	v, err := Validate(`{"kind":"selftest","iterations":-2}`, 0)
	require.NoError(t, err)
	require.Equal(t, `[{"path":"iterations","message":"must be in [1, 1e15], got -2","allowed":"[1, 1e15]"}]`, v)
	v, err = Validate(`{"kind":"selftest"}`, 0)
	require.NoError(t, err)
	require.Equal(t, `[]`, v)
	_, err = Presets("gpu")
	require.ErrorContains(t, err, `SpecError: invalid spec: catalog: must be one of`)
	b, err := Presets("gpus")
	require.NoError(t, err)
	require.NotEmpty(t, b)
	k, err := Kinds()
	require.NoError(t, err)
	require.Contains(t, k, `"selftest"`)
}

func TestConcurrentRuns(t *testing.T) {
	var hs []int64
	for i := 0; i < 8; i++ {
		h, err := Start(`{"kind":"selftest","iterations":200000}`, 0)
		require.NoError(t, err)
		hs = append(hs, h)
	}
	for _, h := range hs {
		_, err := Result(h)
		require.NoError(t, err)
	}
}
