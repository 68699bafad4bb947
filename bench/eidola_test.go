package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
)

// eidolaSpec is the benchmark kernel: a 64-tile all-gather + GEMM
// (2048×512×4096 bf16 in 128×128 tiles: 16 tile rows × 4 tile columns) on
// an H100, one sync mode, the ghosts' writes from a generator with per-row
// jitter. M = 2048 is a multiple of 16, 256 and 1,024 GPUs.
func eidolaSpec(ghosts int, source string) []byte {
	return []byte(fmt.Sprintf(`{"kind":"eidola","ghosts":%d,"kernel":"allgather_gemm",
		"gemm":{"m":2048,"n":512,"k":4096},"tile":{"m":128,"n":128},
		"script_source":%q,"generator":{"start_s":2e-6},"jitter_s":1e-6,
		"sync_modes":["spin_wait"]}`, ghosts, source))
}

func runEidola(b *testing.B, doc []byte) {
	if _, _, err := all.Run(scenario.Env{Ctx: context.Background()}, doc); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkEidolaGhosts: one whole scenario run (decode, script, replay,
// tables) per op; the cost is per kernel, for 15, 255 and 1,023 ghosts.
// Run: go test ./bench -run '^$' -bench EidolaGhosts -benchtime 20x
func BenchmarkEidolaGhosts(b *testing.B) {
	for _, ghosts := range []int{15, 255, 1023} {
		doc := eidolaSpec(ghosts, "generator")
		b.Run(fmt.Sprintf("ghosts=%d", ghosts), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				runEidola(b, doc)
			}
		})
	}
}

// BenchmarkEidolaGhostScaling reports cost(255 ghosts) / cost(15 ghosts)
// and cost(1023) / cost(15) for the same kernel: ghosts are script rows, so
// the ratios stay far below 17 and 68.
// Run: go test ./bench -run '^$' -bench EidolaGhostScaling -benchtime 10x
func BenchmarkEidolaGhostScaling(b *testing.B) {
	cost := func(ghosts int) time.Duration {
		doc := eidolaSpec(ghosts, "generator")
		runEidola(b, doc) // warm up
		const reps = 20
		start := time.Now()
		for i := 0; i < reps; i++ {
			runEidola(b, doc)
		}
		return time.Since(start) / reps
	}
	for i := 0; i < b.N; i++ {
		c15, c255, c1023 := cost(15), cost(255), cost(1023)
		b.ReportMetric(float64(c15.Microseconds()), "us/run@15")
		b.ReportMetric(float64(c255.Microseconds()), "us/run@255")
		b.ReportMetric(float64(c1023.Microseconds()), "us/run@1023")
		b.ReportMetric(float64(c255)/float64(c15), "cost255/cost15")
		b.ReportMetric(float64(c1023)/float64(c15), "cost1023/cost15")
	}
}

// BenchmarkEidolaSetupRun: the set-up run that records a script, i.e. the
// whole group simulated (every GPU detailed, every write a flow on one
// NVSwitch-like switch), then the replay. This is the cost the ghosts save.
// Run: go test ./bench -run '^$' -bench EidolaSetupRun -benchtime 1x
func BenchmarkEidolaSetupRun(b *testing.B) {
	for _, ghosts := range []int{15, 255} {
		doc := eidolaSpec(ghosts, "setup_run")
		b.Run(fmt.Sprintf("ghosts=%d", ghosts), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				runEidola(b, doc)
			}
		})
	}
}
