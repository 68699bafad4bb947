// Package bindings is the only package gopy sees. It exposes a handful of
// functions with plain types (strings, ints, floats, []byte, error); all
// logic lives in core/. Every exported function recovers panics, because a
// Go panic would otherwise abort the Python interpreter.
//
// Errors carry a class prefix that the Python package maps to exceptions in
// one place: "SpecError: ", "SimulationError: ", "Canceled: ", "InternalError: ".
// A SpecError's text is followed by ProblemsMark and its problems as a JSON
// list of {"path", "message", "allowed"}, so Python receives them
// structured instead of parsing the text (gopy passes only the string of
// an error).
package bindings

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/eidolon-sim/eidolon/core/catalog"
	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/eidolon-sim/eidolon/core/table"
)

// Version is the eidolon version written into every table's metadata, and
// the project's one version: setup.py reads this line for the Python
// package's version (pyproject.toml declares it dynamic) and
// eidolon.__version__ is that package version (python/tests/test_version.py
// checks that the three agree). Keep it on one line, as a string literal.
const Version = "0.1.0"

// ProblemsMark separates a SpecError's text from its problems' JSON: an
// ASCII record separator, which no message contains.
const ProblemsMark = "\x1e"

// problem is a spec.Problem as Python receives it.
type problem struct {
	Path    string `json:"path"`
	Message string `json:"message"`
	Allowed string `json:"allowed"`
}

// problemsJSON is a JSON list of problems ("[]" for none).
func problemsJSON(ps []spec.Problem) string {
	out := make([]problem, len(ps))
	for i, p := range ps {
		out[i] = problem{p.Path, p.Message, p.Allowed}
	}
	var buf strings.Builder
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // "> 0" stays readable
	if err := enc.Encode(out); err != nil {
		// strings always encode
		return "[]"
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// classify prefixes an error with its class for the Python side.
func classify(err error) error {
	var se *spec.Error
	var pe *scenario.PanicError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pe):
		return fmt.Errorf("InternalError: %s", err.Error())
	case errors.As(err, &se):
		return fmt.Errorf("SpecError: %s%s%s", err.Error(), ProblemsMark, problemsJSON(se.Problems))
	case errors.Is(err, context.Canceled):
		return errors.New("Canceled: run interrupted")
	default:
		return fmt.Errorf("SimulationError: %s", err.Error())
	}
}

// guard turns a panic into an InternalError.
func guard(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("InternalError: panic: %v\n%s", r, debug.Stack())
	}
}

// run is one simulation in flight.
type run struct {
	cancel   context.CancelFunc
	done     chan struct{}
	mu       sync.Mutex
	progress float64
	result   []byte
	err      error
}

var (
	runsMu sync.Mutex
	runs   = map[int64]*run{}
	nextID int64
)

// Start decodes and validates a spec (returning a SpecError at once when it
// is invalid), then simulates it in the background. The handle it returns
// is polled with Wait, read with Progress and finished with Result.
//
// maxMemoryBytes caps the run's estimated memory unless the spec sets
// max_memory_bytes; 0 means the default, DefaultMaxMemoryBytes.
func Start(specJSON string, maxMemoryBytes float64) (handle int64, err error) {
	defer guard(&err)
	setSoftMemoryLimit()
	data := []byte(specJSON)
	ceiling := machineBytes()
	if err := spec.CheckMemoryCeiling(maxMemoryBytes, ceiling); err != nil {
		return 0, classify(err)
	}
	limit := memoryLimit(maxMemoryBytes)
	if _, _, err := all.AdmitWithin(data, limit, ceiling); err != nil {
		return 0, classify(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &run{cancel: cancel, done: make(chan struct{})}
	runsMu.Lock()
	nextID++
	handle = nextID
	runs[handle] = r
	runsMu.Unlock()
	go r.supervise(ctx, func() ([]byte, error) { return r.simulate(ctx, data, limit) })
	return handle, nil
}

// memoryLimit is the limit to pass the core: the caller's, or the default.
func memoryLimit(maxMemoryBytes float64) float64 {
	if maxMemoryBytes > 0 {
		return maxMemoryBytes
	}
	return DefaultMaxMemoryBytes()
}

// supervise runs work on its own goroutine and ends the run with its
// outcome, or with the cancellation as soon as the run is canceled: Ctrl-C
// returns at once even from a stretch of work that checks for it only
// every second or more (building the routes of a 65,536-rank ring, a
// collection on a heap of gigabytes), which then finishes behind it and
// is dropped.
func (r *run) supervise(ctx context.Context, work func() ([]byte, error)) {
	defer close(r.done)
	type outcome struct {
		bundle []byte
		err    error
	}
	finished := make(chan outcome, 1)
	go func() {
		var o outcome
		defer func() { finished <- o }()
		defer guard(&o.err) // a panic on this goroutine would abort Python
		o.bundle, o.err = work()
	}()
	select {
	case o := <-finished:
		r.result, r.err = o.bundle, o.err
	case <-ctx.Done():
		r.err = classify(ctx.Err())
	}
}

// simulate runs a spec and bundles its tables.
func (r *run) simulate(ctx context.Context, data []byte, limit float64) ([]byte, error) {
	start := time.Now()
	env := scenario.Env{Ctx: ctx, Progress: func(f float64) {
		r.mu.Lock()
		r.progress = f
		r.mu.Unlock()
	}, Clock: func() float64 { return time.Since(start).Seconds() }, MaxMemoryBytes: limit}
	s, res, err := all.Run(env, data)
	if err != nil {
		return nil, classify(err)
	}
	canonical, err := json.Marshal(s)
	if err != nil {
		return nil, classify(err)
	}
	meta := map[string]string{
		"eidolon_version": Version,
		"kind":            s.Head().Kind,
		"seed":            strconv.FormatUint(s.Head().Seed, 10),
		"spec":            string(canonical),
		"wall_s":          strconv.FormatFloat(time.Since(start).Seconds(), 'g', 6, 64),
	}
	// For a large result the simulation's garbage goes before the tables
	// are encoded, and the rows' after, back to the OS before Python copies
	// the bundle: with a timeline of millions of rows the process peaks
	// while both the bundle and its copy are held (a decode of 100,000
	// tokens: 3.2 GB resident before, with the encoder's own copies, 1.5 GB
	// after). A small one skips both, which would double a 3 ms run.
	large := resultRows(res.Tables) > largeResultRows
	if large {
		runtime.GC()
	}
	bundle, err := encode(res.Tables, meta, env.Canceled)
	if large && err == nil {
		debug.FreeOSMemory()
	}
	return bundle, err
}

// largeResultRows is the rows (of every table) from which a result's
// encoding is worth a collection before and after: about 10 MB of bundle.
const largeResultRows = 1 << 17

// resultRows counts the rows of a result's tables.
func resultRows(tables []scenario.Table) int {
	n := 0
	for _, t := range tables {
		if v := reflect.ValueOf(t.Rows); v.Kind() == reflect.Slice {
			n += v.Len()
		}
	}
	return n
}

// encode bundles the tables, stopping when canceled reports an error (a
// timeline of millions of rows takes a second to encode).
func encode(tables []scenario.Table, meta map[string]string, canceled func() error) ([]byte, error) {
	named := make([]table.Named, len(tables))
	for i, t := range tables {
		named[i] = table.Named{Name: t.Name, Rows: t.Rows}
	}
	b, err := table.Bundle(named, meta, canceled)
	switch {
	case errors.Is(err, context.Canceled):
		return nil, classify(err)
	case err != nil:
		return nil, fmt.Errorf("InternalError: %w", err)
	}
	return b, nil
}

func lookup(handle int64) (*run, error) {
	runsMu.Lock()
	defer runsMu.Unlock()
	r, ok := runs[handle]
	if !ok {
		return nil, fmt.Errorf("InternalError: no run with handle %d", handle)
	}
	return r, nil
}

// Wait blocks up to timeoutMs milliseconds and reports whether the run has
// finished. Python calls it in a loop so that Ctrl-C is seen between calls.
func Wait(handle int64, timeoutMs int64) (done bool, err error) {
	defer guard(&err)
	r, err := lookup(handle)
	if err != nil {
		return false, err
	}
	select {
	case <-r.done:
		return true, nil
	case <-time.After(time.Duration(timeoutMs) * time.Millisecond):
		return false, nil
	}
}

// Progress is the fraction of the run done, in [0, 1].
func Progress(handle int64) (fraction float64, err error) {
	defer guard(&err)
	r, err := lookup(handle)
	if err != nil {
		return 0, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.progress, nil
}

// Cancel asks a run to stop; the core checks the signal between events.
func Cancel(handle int64) (err error) {
	defer guard(&err)
	r, err := lookup(handle)
	if err != nil {
		return err
	}
	r.cancel()
	return nil
}

// Result waits for the run, forgets its handle and returns its tables as a
// bundle of Arrow IPC streams (see table.Bundle), or its error.
func Result(handle int64) (bundle []byte, err error) {
	defer guard(&err)
	r, err := lookup(handle)
	if err != nil {
		return nil, err
	}
	<-r.done
	runsMu.Lock()
	delete(runs, handle)
	runsMu.Unlock()
	r.cancel()
	if r.err != nil {
		return nil, r.err
	}
	if len(r.result) == 0 { // gopy's bytes() aborts on an empty slice
		return nil, errors.New("InternalError: empty result")
	}
	return r.result, nil
}

// Validate decodes, defaults and validates a spec without running it. It
// returns a JSON list of {"path", "message", "allowed"} problems ("[]" when
// valid).
//
// maxMemoryBytes is as for Start.
func Validate(specJSON string, maxMemoryBytes float64) (problems string, err error) {
	defer guard(&err)
	ceiling := machineBytes()
	verr := spec.CheckMemoryCeiling(maxMemoryBytes, ceiling)
	if verr == nil {
		verr = all.ValidateWithin([]byte(specJSON), memoryLimit(maxMemoryBytes), ceiling)
	}
	var se *spec.Error
	if errors.As(verr, &se) {
		return problemsJSON(se.Problems), nil
	} else if verr != nil {
		return "", classify(verr)
	}
	return "[]", nil
}

// Kinds lists the scenario kinds as JSON [{"name", "doc"}].
func Kinds() (kinds string, err error) {
	defer guard(&err)
	type kind struct {
		Name string `json:"name"`
		Doc  string `json:"doc"`
	}
	var out []kind
	for _, k := range all.Kinds() {
		out = append(out, kind{k.Name, k.Doc})
	}
	b, _ := json.Marshal(out)
	return string(b), nil
}

// Presets returns a preset catalogue ("gpus", "links", ...) as a bundle
// holding one table of that name.
func Presets(name string) (bundle []byte, err error) {
	defer guard(&err)
	rows, err := presetRows(name)
	if err != nil {
		return nil, err
	}
	return encode([]scenario.Table{{Name: name, Rows: rows}}, map[string]string{"eidolon_version": Version}, nil)
}

// ForcePanic panics inside an exported function; tests use it to show that
// the recovery keeps the interpreter alive.
func ForcePanic() (err error) {
	defer guard(&err)
	var m map[string]int
	m["boom"]++ // a real runtime panic: assignment to a nil map
	return nil
}

func presetRows(name string) (any, error) {
	rows, err := catalog.Rows(name)
	return rows, classify(err)
}

// Canonical returns the spec after defaults, as JSON (what a run's tables
// record in their "spec" metadata), or the spec's SpecError. Sweeps key
// stored results by it, so that spelling a default out changes nothing.
func Canonical(specJSON string) (canonical string, err error) {
	defer guard(&err)
	_, s, err := all.Decode([]byte(specJSON))
	if err != nil {
		return "", classify(err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return "", classify(err)
	}
	return string(b), nil
}

// EngineVersion is Version, for Python (sweep stores key results by it).
func EngineVersion() string { return Version }
