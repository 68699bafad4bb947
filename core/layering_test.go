package core_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/eidolon-sim/eidolon/"

// layers is the table of which core packages each core package may import
// (non-test files), the one docs/ARCHITECTURE.md shows: imports point
// downward, and scenario drivers do not import each other. A package that is
// not in the table fails the test until it is placed.
//
// The input language (spec) asks the models below it for its vocabularies
// (GPU, link, model, cluster presets, topology kinds, collective
// algorithms); the models never see a spec: compile turns a validated spec
// into their plain values.
var layers = map[string][]string{
	"core/hw":        {},
	"core/rng":       {},
	"core/sim":       {},
	"core/table":     {},
	"core/problem":   {},
	"core/quant":     {"core/rng"},
	"core/model":     {"core/hw", "core/problem"},
	"core/compute":   {"core/hw", "core/model"},
	"core/stats":     {},
	"core/calibrate": {"core/compute", "core/hw", "core/model", "core/stats"},
	"core/topo":      {"core/hw", "core/problem", "core/rng"},
	"core/net":       {"core/hw", "core/rng", "core/sim", "core/topo"},
	"core/workload":  {"core/hw", "core/model", "core/problem", "core/rng"},
	"core/seedflood": {"core/rng"},
	"core/eidola":    {"core/hw", "core/net", "core/rng", "core/sim"},
	"core/exec":      {"core/compute", "core/hw", "core/model", "core/net", "core/sim", "core/topo", "core/workload"},
	"core/serving":   {"core/compute", "core/exec", "core/hw", "core/model", "core/net", "core/rng", "core/topo", "core/workload"},
	"core/catalog":   {"core/hw", "core/model", "core/problem", "core/topo"},
	"core/spec":      {"core/calibrate", "core/hw", "core/model", "core/net", "core/problem", "core/seedflood", "core/topo"},
	"core/compile":   {"core/exec", "core/hw", "core/net", "core/problem", "core/sim", "core/spec", "core/topo"},
	"core/scenario":  {"core/spec"},
	"core/job": {"core/compile", "core/exec", "core/hw", "core/model", "core/net", "core/problem", "core/scenario", "core/sim",
		"core/spec", "core/topo", "core/workload"},
	"core/scenario/all": {"core/scenario", "core/spec", "core/scenario/calibrate", "core/scenario/collective", "core/scenario/eidola", "core/scenario/faultsweep",
		"core/scenario/inference", "core/scenario/operators", "core/scenario/parallelsearch", "core/scenario/seedflood",
		"core/scenario/selftest", "core/scenario/serving", "core/scenario/ssmtp", "core/scenario/training"},
}

// driverBase is what every scenario driver (core/scenario/<kind>) may
// import besides its own entry in layers: the models, the spec, the
// compile step and the scenario seam.
var driverBase = []string{"core/scenario", "core/spec", "core/compile", "core/problem", "core/hw", "core/model", "core/compute", "core/calibrate", "core/stats", "core/rng", "core/sim",
	"core/topo", "core/net", "core/workload", "core/exec", "core/quant", "core/seedflood", "core/eidola", "core/serving", "core/table", "core/job"}

func allowedImports(pkg string) (map[string]bool, bool) {
	own, ok := layers[pkg]
	driver := strings.HasPrefix(pkg, "core/scenario/") && pkg != "core/scenario/all"
	if !ok && !driver {
		return nil, false
	}
	out := map[string]bool{}
	for _, p := range own {
		out[p] = true
	}
	if driver {
		for _, p := range driverBase {
			out[p] = true
		}
	}
	return out, true
}

// layeringViolations lists the imports of pkgs (package → core packages it
// imports) the table does not allow, and packages missing from it.
func layeringViolations(pkgs map[string][]string) []string {
	var out []string
	for pkg, imps := range pkgs {
		allowed, ok := allowedImports(pkg)
		if !ok {
			out = append(out, pkg+": not in the layering table (core/layering_test.go, docs/ARCHITECTURE.md): place it")
			continue
		}
		for _, imp := range imps {
			if imp != pkg && !allowed[imp] {
				out = append(out, pkg+" imports "+imp+", which the layering table does not allow")
			}
		}
	}
	sort.Strings(out)
	return out
}

// corePackages reads the core packages under the working directory and
// their imports of other core packages, from non-test files.
func corePackages(t *testing.T) map[string][]string {
	fset := token.NewFileSet()
	pkgs := map[string][]string{}
	sourceFiles(t, fset, ".", parser.ImportsOnly, func(path string, f *ast.File) {
		pkg := "core"
		if dir := filepath.ToSlash(filepath.Dir(path)); dir != "." {
			pkg = "core/" + dir
		}
		if _, ok := pkgs[pkg]; !ok {
			pkgs[pkg] = nil
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if rest, ok := strings.CutPrefix(p, module); ok && strings.HasPrefix(rest, "core/") {
				pkgs[pkg] = append(pkgs[pkg], rest)
			}
		}
	})
	return pkgs
}

func TestLayering(t *testing.T) {
	pkgs := corePackages(t)
	require.NotEmpty(t, pkgs["core/exec"], "the walk found core/exec's imports")
	v := layeringViolations(pkgs)
	require.Empty(t, v, "imports must point downward:\n%s", strings.Join(v, "\n"))
}

// The checker itself: a model importing a driver, a model importing a
// higher model, a model importing the spec, a driver importing another
// driver and an unplaced package are each reported; allowed imports are not.
func TestLayeringCatchesViolations(t *testing.T) {
	v := layeringViolations(map[string][]string{
		"core/compute":             {"core/hw", "core/exec"},
		"core/model":               {"core/scenario/training"},
		"core/scenario/ssmtp":      {"core/exec", "core/scenario/training"},
		"core/scenario/inference":  {"core/job", "core/scenario/training"},
		"core/job":                 {"core/exec", "core/scenario/training"},
		"core/newthing":            {"core/hw"},
		"core/topo":                {"core/hw", "core/spec"},
		"core/scenario/faultsweep": {"core/job", "core/scenario/collective"},
	})
	assert.Equal(t, []string{
		"core/compute imports core/exec, which the layering table does not allow",
		"core/job imports core/scenario/training, which the layering table does not allow",
		"core/model imports core/scenario/training, which the layering table does not allow",
		"core/newthing: not in the layering table (core/layering_test.go, docs/ARCHITECTURE.md): place it",
		"core/scenario/faultsweep imports core/scenario/collective, which the layering table does not allow",
		"core/scenario/inference imports core/scenario/training, which the layering table does not allow",
		"core/scenario/ssmtp imports core/scenario/training, which the layering table does not allow",
		"core/topo imports core/spec, which the layering table does not allow",
	}, v)
}
