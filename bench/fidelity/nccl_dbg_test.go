package fidelity

import (
	"context"
	"fmt"
	"testing"
)

func TestDbgColl(t *testing.T) {
	g, err := CollGroups(KernelsDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, gen := range []string{"ampere", "hopper"} {
		p, s, err := FitGeneration(gen, g)
		fmt.Printf("%s %+v score %.3f %v\n", gen, p, s, err)
	}
	rows, err := Simulate(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"dgx-a100", "dgx-h100", "a100-pairwise-nvlink", "h100-pairwise-nvlink"} {
		fmt.Println(h, FitHost(rows, g, h, KernelTime), FitHost(rows, g, h, HostTimedG8))
	}
	for i, r := range rows {
		if i%3 == 0 {
			fmt.Printf("%-26s %11.0f med %8.1f sim %8.1f %+6.0f%% %s/%s nc%d %s\n", r.Group, r.SizeBytes, r.MedianS*1e6, r.SimulatedS*1e6, r.ErrorPct, r.Algorithm, r.Protocol, r.Channels, r.Bound)
		}
	}
	for _, s := range Stats(rows, 0) {
		fmt.Printf("%+v\n", s)
	}
}

func TestDbgStats(t *testing.T) {
	g, _ := CollGroups(KernelsDir())
	rows, _ := Simulate(context.Background(), g)
	for _, s := range Stats(rows, 2<<20) {
		fmt.Printf("%+v\n", s)
	}
	for _, r := range rows {
		if r.SizeBytes >= 2<<20 && (r.ErrorPct > 10 || r.ErrorPct < -10) {
			fmt.Printf("%-26s %11.0f med %8.1f sim %8.1f %+6.0f%% %s/%s nc%d %s\n", r.Group, r.SizeBytes, r.MedianS*1e6, r.SimulatedS*1e6, r.ErrorPct, r.Algorithm, r.Protocol, r.Channels, r.Bound)
		}
	}
}
