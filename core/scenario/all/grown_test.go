package all_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/stretchr/testify/require"
)

// The random draws of TestRandomSpecsRunClean know the training, inference
// and serving options by hand. Here every kind's minimal spec grows by the
// optional fields the validator itself names ("unknown field; allowed
// here: …"), each given a value of the type and in the range its problem
// says ("must be one of […]", "must be an integer in [a, b]", "must be an
// object", "must be a list"), so that options nobody drew by hand are
// tried together. What the growing leaves invalid is trimmed, field by
// field, where the problems point, until it validates or gives up. Every
// spec, valid or not, must run to finite tables or stop with a spec or
// simulation error, never panic, and validate must refuse exactly what the
// run refuses as a bad spec. Found this way: an empty "groups" list that
// indexed a communicator that was not there, and ssm_tp and serving specs
// that validated and then failed the run's memory checks.
// More specs: EIDOLON_GROWN_SEED=n go test ./core/scenario/all -run TestGrownSpecsRunClean -v
func TestGrownSpecsRunClean(t *testing.T) {
	seed := seedFromEnv("EIDOLON_GROWN_SEED")
	g := grower{rng: rand.New(rand.NewPCG(seed, 13))}
	kinds := sortedKeys(minimal, "selftest") // selftest's one field is its length: a busy loop, not a model
	const specs = 110
	ran := 0
	for i := range specs {
		var doc map[string]any
		require.NoError(t, json.Unmarshal([]byte(minimal[kinds[i%len(kinds)]]), &doc))
		g.grow(doc, 1+g.rng.IntN(8))
		if g.rng.IntN(8) > 0 {
			g.trim(doc)
		}
		if requireBoundedRunsClean(t, doc, fmt.Sprintf("spec %d", i)) {
			ran++
		}
	}
	t.Logf("seed %d: %d of %d grown specs ran", seed, ran, specs)
	require.GreaterOrEqual(t, ran, specs/3, "too few grown specs ran to test anything")
}

// sortedKeys are m's keys but skip, in order.
func sortedKeys[V any](m map[string]V, skip string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		if k != skip {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// boundedMemoryBytes is the memory limit of the grown and random specs.
const boundedMemoryBytes = 2e9

// requireBoundedRunsClean is requireRunsClean for a decoded spec bounded
// to a few million events, 2 GB and 10 s, whatever it asks for.
func requireBoundedRunsClean(t *testing.T, doc map[string]any, what string) bool {
	t.Helper()
	doc["max_events"], doc["max_memory_bytes"] = 3e6, boundedMemoryBytes
	js, err := json.Marshal(doc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return requireRunsClean(t, ctx, js, what)
}

// grower adds the fields a spec's validator names to a decoded spec.
type grower struct{ rng *rand.Rand }

// grow adds steps fields, each at a random object of doc.
func (g grower) grow(doc map[string]any, steps int) {
	for range steps {
		var objects [][]any
		walkObjects(doc, nil, func(p []any) { objects = append(objects, p) })
		path := objects[g.rng.IntN(len(objects))]
		fields := g.allowed(doc, path)
		if len(fields) == 0 {
			continue
		}
		f := fields[g.rng.IntN(len(fields))]
		v := g.value(doc, append(slices.Clone(path), f), 0)
		at(doc, path).(map[string]any)[f] = v
	}
}

// trim deletes, a field at a time, what the problems point at, until doc
// validates or a dozen fields are gone.
func (g grower) trim(doc map[string]any) {
	for range 12 {
		ps := problems(doc)
		if len(ps) == 0 {
			return
		}
		path := parsePath(ps[g.rng.IntN(len(ps))].Path)
		if len(path) == 0 || path[0] == "kind" {
			return
		}
		switch parent := at(doc, path[:len(path)-1]).(type) {
		case map[string]any:
			delete(parent, fmt.Sprint(path[len(path)-1]))
		case []any:
			i, _ := path[len(path)-1].(int)
			if i < len(parent) {
				setAt(doc, path[:len(path)-1], slices.Delete(parent, i, i+1))
			}
		default:
			return
		}
	}
}

var (
	listed = regexp.MustCompile(`\[(.*)\]`)
	ranged = regexp.MustCompile(`in [\[(]([-0-9.e+]+), ([-0-9.e+]+)[\])]`)
)

// allowed are the fields the validator allows at the object at path, but
// those that bound or name the run.
func (g grower) allowed(doc map[string]any, path []any) []string {
	at(doc, path).(map[string]any)["zz_probe"] = 1
	defer delete(at(doc, path).(map[string]any), "zz_probe")
	for _, p := range problems(doc) {
		if p.Path != pathString(append(slices.Clone(path), "zz_probe")) {
			continue
		}
		var fields []string
		if m := listed.FindStringSubmatch(p.Allowed); m != nil && json.Unmarshal([]byte(m[0]), &fields) == nil {
			return slices.DeleteFunc(fields, func(f string) bool {
				return f == "kind" || f == "max_events" || f == "max_memory_bytes"
			})
		}
	}
	return nil
}

// value is a value for the field at path of the type and range its
// problem asks for, learnt by setting a string there first.
func (g grower) value(doc map[string]any, path []any, depth int) any {
	problemAt := func(v any) string {
		setAt(doc, path, v)
		for _, p := range problems(doc) {
			if p.Path == pathString(path) {
				return p.Message
			}
		}
		return ""
	}
	m := problemAt("zz")
	switch {
	case m == "":
		return "zz" // a free string (a name)
	case strings.Contains(m, "one of ["):
		var opts []any
		if l := listed.FindStringSubmatch(m); l != nil && json.Unmarshal([]byte(l[0]), &opts) == nil && len(opts) > 0 {
			return opts[g.rng.IntN(len(opts))]
		}
	case strings.Contains(m, "must be an integer"), strings.Contains(m, "must be a number"):
		cands := []float64{0, 1, 2, 3, 4, 8, 64, 1000, -1, 0.5, 1e-6, 1e9}
		if r := ranged.FindStringSubmatch(problemAt(1e17)); r != nil {
			lo, _ := strconv.ParseFloat(r[1], 64)
			hi, _ := strconv.ParseFloat(r[2], 64)
			cands = append(cands, lo, hi, lo+(hi-lo)*g.rng.Float64(), lo+1, hi-1)
		}
		v := cands[g.rng.IntN(len(cands))]
		if strings.Contains(m, "integer") {
			return float64(int64(max(min(v, 1<<53), -1<<53)))
		}
		return v
	case strings.Contains(m, "true or false"), strings.Contains(m, "boolean"):
		return g.rng.IntN(2) == 0
	case strings.Contains(m, "must be an object"):
		return map[string]any{}
	case strings.Contains(m, "must be a list"):
		if depth >= 2 || g.rng.IntN(5) == 0 {
			return []any{}
		}
		setAt(doc, path, []any{"zz"})
		e := g.value(doc, append(slices.Clone(path), 0), depth+1)
		return []any{e}
	}
	return 1
}

// problems are doc's problems as validate reports them, under the memory
// limit the runs get (validate builds the cluster: unbounded, a grown
// cluster of 10^5 fully connected GPUs exhausted the machine at seed 573).
func problems(doc map[string]any) []spec.Problem {
	js, err := json.Marshal(doc)
	if err != nil {
		return nil
	}
	var se *spec.Error
	if errors.As(all.Validate(js, boundedMemoryBytes), &se) {
		return se.Problems
	}
	return nil
}

// walkObjects calls f with the path of every object in v.
func walkObjects(v any, path []any, f func([]any)) {
	switch x := v.(type) {
	case map[string]any:
		f(slices.Clone(path))
		for _, k := range sortedKeys(x, "") { // map order is random: a seed must grow the same specs
			walkObjects(x[k], append(path, k), f)
		}
	case []any:
		for i, c := range x {
			walkObjects(c, append(path, i), f)
		}
	}
}

// at is the value at path in v (nil where there is none).
func at(v any, path []any) any {
	for _, p := range path {
		switch x := v.(type) {
		case map[string]any:
			v = x[fmt.Sprint(p)]
		case []any:
			i, ok := p.(int)
			if !ok || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// setAt sets the value at a non-empty path whose parent exists.
func setAt(doc map[string]any, path []any, v any) {
	switch parent := at(doc, path[:len(path)-1]).(type) {
	case map[string]any:
		parent[fmt.Sprint(path[len(path)-1])] = v
	case []any:
		if i, ok := path[len(path)-1].(int); ok && i < len(parent) {
			parent[i] = v
		}
	}
}

var pathPart = regexp.MustCompile(`[^.\[\]]+|\[\d+\]`)

// parsePath reads a problem's path ("a.b[2].c") as keys and indices.
func parsePath(s string) []any {
	var out []any
	for _, p := range pathPart.FindAllString(s, -1) {
		if strings.HasPrefix(p, "[") {
			i, _ := strconv.Atoi(p[1 : len(p)-1])
			out = append(out, i)
		} else {
			out = append(out, p)
		}
	}
	return out
}

// pathString writes a path as problems do.
func pathString(path []any) string {
	var b strings.Builder
	for _, p := range path {
		if i, ok := p.(int); ok {
			fmt.Fprintf(&b, "[%d]", i)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(fmt.Sprint(p))
	}
	return b.String()
}
