package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/problem"
)

// GPU is the part a run is on: a preset name ("h100-sxm") or, to ask what
// a part that differs from it would do, an object naming the preset and
// the figures that change, by hw.GPU's JSON names (eidolon.presets.gpus()
// has them as columns):
//
//	{"preset": "h100-sxm", "hbm_bandwidth_bytes_per_s": 4.8e12, "hbm_bytes": 141e9}
//
// Everything not given is the preset's, its fitted kernel parameters
// included, so the what-if part keeps the preset's measured behaviour
// where nothing says it differs. Name labels it in the tables (default: the
// preset's name followed by "*").
type GPU struct {
	Preset string
	Name   string
	// Figures are the changed figures by JSON name.
	Figures map[string]float64
	// decodeProblems are the object form's type errors (paths relative to
	// the GPU), reported by Validate under the GPU's own path; object says
	// the spec gave that form (its preset's problems are at gpu.preset).
	decodeProblems []Problem
	object         bool
}

// maxGPUNameLen bounds a what-if part's label.
const maxGPUNameLen = 128

// UnmarshalJSON accepts a preset name or an object of a preset and figures.
func (g *GPU) UnmarshalJSON(data []byte) error {
	*g = GPU{}
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '"' {
		return json.Unmarshal(data, &g.Preset)
	}
	tree, err := parseTree(data)
	if err != nil {
		return err
	}
	if tree == nil {
		return nil // null: as if not given
	}
	var p Problems
	obj, ok := tree.(map[string]any)
	if !ok {
		p.Addf("", "must be a GPU preset name or an object with \"preset\" and the figures to change, got %s", jsonKind(tree))
		g.decodeProblems = p.List()
		return nil
	}
	g.object = true
	allowed := append([]string{"name", "preset"}, hw.FigureNames()...)
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := obj[k]
		switch k {
		case "preset", "name":
			if checkValue(&p, k, v, reflect.TypeFor[string]()) {
				s, _ := v.(string) // null: as if not given
				if k == "preset" {
					g.Preset = s
				} else {
					g.Name = s
				}
			}
			continue
		}
		if _, ok := hw.FigureByName(k); !ok {
			unknownField(&p, k, k, allowed)
			continue
		}
		if !checkValue(&p, k, v, reflect.TypeFor[float64]()) || v == nil {
			continue
		}
		n := v.(json.Number)
		f, err := n.Float64()
		if err != nil {
			p.Addf(k, "must be a finite number, got %s", n)
			continue
		}
		if g.Figures == nil {
			g.Figures = map[string]float64{}
		}
		g.Figures[k] = f
	}
	if _, ok := obj["preset"]; !ok {
		p.AddAllowed("preset", "one of "+problem.Quoted(hw.GPUNames()), "required: the preset the figures change")
	}
	g.decodeProblems = p.List()
	return nil
}

// MarshalJSON writes a bare preset as its name, anything else as an object.
func (g GPU) MarshalJSON() ([]byte, error) {
	if g.Name == "" && len(g.Figures) == 0 {
		return json.Marshal(g.Preset)
	}
	obj := map[string]any{"preset": g.Preset}
	if g.Name != "" {
		obj["name"] = g.Name
	}
	for k, v := range g.Figures {
		obj[k] = v
	}
	return json.Marshal(obj)
}

// IsZero reports a GPU that names nothing (what omitzero leaves out).
func (g GPU) IsZero() bool { return g.Preset == "" && g.Name == "" && len(g.Figures) == 0 }

// absent reports a GPU the spec did not give (one given as a bad object is
// not absent: its problems are reported, not replaced by a default).
func (g GPU) absent() bool { return g.IsZero() && len(g.decodeProblems) == 0 }

// String is the part's label: its name, else its preset's (with "*" when
// figures change).
func (g GPU) String() string {
	switch {
	case g.Name != "":
		return g.Name
	case len(g.Figures) > 0:
		return g.Preset + "*"
	}
	return g.Preset
}

// Resolve returns the part: the preset with its figures changed. It is
// false for an unknown preset or a figure Validate rejects; no caller may
// price anything on such a part.
func (g GPU) Resolve() (hw.GPU, bool) {
	var p Problems
	return g.Validate(&p, "")
}

// Validate reports what is wrong with the part at path and returns the
// part when nothing is.
func (g GPU) Validate(p *Problems, path string) (hw.GPU, bool) {
	n := p.Len()
	for _, dp := range g.decodeProblems {
		if dp.Path == "" {
			dp.Path = path
		} else {
			dp.Path = Field(path, dp.Path)
		}
		p.Add(dp)
	}
	if len(g.Name) > maxGPUNameLen {
		p.Addf(Field(path, "name"), "has %d characters; at most %d", len(g.Name), maxGPUNameLen)
	}
	names := make([]string, 0, len(g.Figures))
	for k := range g.Figures {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		v := g.Figures[k]
		f, _ := hw.FigureByName(k)
		switch {
		case math.IsNaN(v) || v < f.Min || v > f.Max:
			p.AddAllowed(Field(path, k), fmt.Sprintf("[%g, %g]", f.Min, f.Max), "must be in [%g, %g], got %v", f.Min, f.Max, v)
		case f.Integer && v != math.Trunc(v):
			p.Addf(Field(path, k), "must be a whole number, got %v", v)
		}
	}
	if g.Preset == "" && len(g.decodeProblems) > 0 {
		return hw.GPU{}, false // the object's missing or mistyped preset is reported
	}
	at := path
	if g.object {
		at = Field(path, "preset")
	}
	part, ok := hw.GPUByName(g.Preset)
	if !ok {
		p.OneOf(at, g.Preset, hw.GPUNames())
	}
	if !ok || p.Len() > n {
		return hw.GPU{}, false
	}
	for k, v := range g.Figures {
		part.SetFigure(k, v)
	}
	if len(names) > 0 {
		part.KernelParameters = fmt.Sprintf("%s's (%s), with %s changed", g.Preset, part.KernelParameters, strings.Join(names, ", "))
	}
	part.Name = g.String()
	return part, true
}
