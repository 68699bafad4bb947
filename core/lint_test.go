// Package core_test holds lint rules for the whole simulation core, written
// as an ordinary test: core/ must stay pure (no I/O, no wall clock, no global
// randomness, no process exits), so runs are deterministic and embeddable.
package core_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// forbiddenImports may not be imported by non-test files under core/.
var forbiddenImports = map[string]string{
	"os":        "core/ does no I/O; the caller passes data in",
	"math/rand": "use math/rand/v2 with an explicit seeded source (core/rng)",
	"log":       "return errors instead of logging",
	"os/exec":   "core/ does no I/O",
	"net/http":  "core/ does no I/O",
	"io/ioutil": "core/ does no I/O",
	"unsafe":    "keep the core memory-safe",
}

// forbiddenCalls are package-level functions that may not be called.
var forbiddenCalls = map[string]map[string]string{
	"time":         {"Now": "simulated time only", "Since": "simulated time only", "Sleep": "simulated time only"},
	"fmt":          {"Print": "no printing", "Println": "no printing", "Printf": "no printing"},
	"os":           {"Exit": "never exit the host process"},
	"log":          {"Fatal": "never exit the host process", "Fatalf": "never exit the host process"},
	"math/rand/v2": {"*": "global random functions; use rand.New with a seeded source (core/rng)"},
}

// allowedRandV2 are the math/rand/v2 constructors that take an explicit source.
var allowedRandV2 = map[string]bool{"New": true, "NewPCG": true, "NewChaCha8": true, "NewZipf": true}

// sourceFiles parses every non-test Go file below root (testdata left
// out) and hands it to each, with its slash-separated path.
func sourceFiles(t *testing.T, fset *token.FileSet, root string, mode parser.Mode, each func(path string, f *ast.File)) {
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, mode)
		require.NoError(t, err, path)
		each(filepath.ToSlash(path), f)
		return nil
	})
	require.NoError(t, err)
}

func TestCoreIsPure(t *testing.T) {
	fset := token.NewFileSet()
	var violations []string
	sourceFiles(t, fset, ".", parser.SkipObjectResolution, func(_ string, f *ast.File) {
		violations = append(violations, lint(fset, f)...)
	})
	require.Empty(t, violations, "core/ must stay pure:\n%s", strings.Join(violations, "\n"))
}

// lint returns the rule violations of one parsed file.
func lint(fset *token.FileSet, f *ast.File) []string {
	var violations []string
	names := map[string]string{} // local name -> import path
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if why, bad := forbiddenImports[p]; bad {
			violations = append(violations, fset.Position(imp.Pos()).String()+": imports "+p+": "+why)
		}
		local := p[strings.LastIndex(p, "/")+1:]
		if p == "math/rand/v2" {
			local = "rand"
		}
		if imp.Name != nil {
			local = imp.Name.Name
		}
		names[local] = p
	}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		id, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		p, ok := names[id.Name]
		if !ok {
			return true
		}
		why, bad := forbiddenCalls[p][sel.Sel.Name]
		if p == "math/rand/v2" && ast.IsExported(sel.Sel.Name) && !allowedRandV2[sel.Sel.Name] && !isType(sel.Sel.Name) {
			why, bad = forbiddenCalls[p]["*"], true
		}
		if bad {
			violations = append(violations, fset.Position(sel.Pos()).String()+": "+p+"."+sel.Sel.Name+": "+why)
		}
		return true
	})
	return violations
}

// isType reports the math/rand/v2 type names, which are fine to mention.
func isType(name string) bool {
	switch name {
	case "Rand", "Source", "PCG", "ChaCha8", "Zipf":
		return true
	}
	return false
}

// TestLintCatchesViolations feeds the rules a file that breaks them, so the
// lint itself cannot silently pass everything.
func TestLintCatchesViolations(t *testing.T) {
	src := `package x
import (
	"fmt"
	"math/rand/v2"
	"os"
	"time"
)
func f() { fmt.Println(time.Now(), rand.IntN(3)); _ = rand.New(rand.NewPCG(1, 2)); os.Exit(1) }`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, 0)
	require.NoError(t, err)
	v := lint(fset, f)
	require.Len(t, v, 5, "%v", v)
	require.Contains(t, v[0], "imports os")
	require.Contains(t, v[1], "fmt.Println")
	require.Contains(t, v[2], "time.Now")
	require.Contains(t, v[3], "math/rand/v2.IntN")
	require.Contains(t, v[4], "os.Exit")
}

// goAllowed are the only files in core/ and bindings/ (relative to core/)
// that may start goroutines. Each one defers scenario.Recover (or the
// bindings' guard) at the top of the goroutine: a panic in any other
// goroutine than the caller's aborts the Python interpreter. Add a file
// here only with such a recovery.
var goAllowed = map[string]bool{
	"scenario/parallelsearch/parallelsearch.go": true,
	"scenario/serving/search.go":                true,
	"../bindings/bindings.go":                   true,
}

func TestGoStatementsOnlyWhereListed(t *testing.T) {
	fset := token.NewFileSet()
	var violations []string
	found := map[string]bool{}
	for _, root := range []string{".", "../bindings"} {
		sourceFiles(t, fset, root, parser.SkipObjectResolution, func(rel string, f *ast.File) {
			for _, pos := range goStatements(f) {
				if goAllowed[rel] {
					found[rel] = true
					continue
				}
				violations = append(violations, fset.Position(pos).String()+": go statement outside the listed files (see goAllowed)")
			}
		})
	}
	require.Empty(t, violations, "goroutines must recover their panics:\n%s", strings.Join(violations, "\n"))
	for f := range goAllowed {
		require.True(t, found[f], "%s is listed in goAllowed but starts no goroutine: drop it", f)
	}
}

// goStatements returns the position of every go statement in a file.
func goStatements(f *ast.File) []token.Pos {
	var out []token.Pos
	ast.Inspect(f, func(n ast.Node) bool {
		if g, ok := n.(*ast.GoStmt); ok {
			out = append(out, g.Pos())
		}
		return true
	})
	return out
}

func TestGoLintCatchesAGoroutine(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", "package x\nfunc f() { go func() {}(); go g() }\nfunc g() {}", 0)
	require.NoError(t, err)
	require.Len(t, goStatements(f), 2)
}
