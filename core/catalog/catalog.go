// Package catalog lists the preset catalogues (GPUs, links, ...) as table rows.
package catalog

import (
	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/eidolon-sim/eidolon/core/problem"
	"github.com/eidolon-sim/eidolon/core/topo"
)

type entry struct {
	name string
	rows func() any
}

func entries() []entry {
	return []entry{
		{"gpus", func() any { return hw.GPUPresets() }},
		{"gpu_figures", func() any { return hw.Figures() }},
		{"links", func() any { return hw.LinkPresets() }},
		{"models", func() any { return model.Catalog() }},
		{"clusters", func() any { return topo.PresetRows() }},
	}
}

// Names lists the catalogues.
func Names() []string {
	var out []string
	for _, e := range entries() {
		out = append(out, e.name)
	}
	return out
}

// Rows returns a catalogue's rows (a slice of arrow-tagged structs).
func Rows(name string) (any, error) {
	for _, e := range entries() {
		if e.name == name {
			return e.rows(), nil
		}
	}
	var p problem.Problems
	p.OneOf("catalog", name, Names())
	return nil, p.Err()
}
