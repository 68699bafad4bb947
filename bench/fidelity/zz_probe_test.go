package fidelity

import (
	"fmt"
	"testing"

	"github.com/eidolon-sim/eidolon/core/compute"
	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
)

func TestZZFA3(t *testing.T) {
	g, _ := VidurGPU("h100")
	ev := compute.NewEvaluator(g)
	for _, s := range []int64{512, 1024, 2048, 4096, 8192, 16384} {
		b := 16384 / s
		line := fmt.Sprintf("seq %5d:", s)
		for _, causal := range []bool{false, true} {
			f := model.NewFlashAttention("a", hw.BF16, b, 16, 16, s, s, 128, causal)
			c, _ := ev.Op(f)
			bw := f
			bw.Kind = model.FlashAttentionBwd
			bw.FLOPs = 2.5 * f.FLOPs
			cb, _ := ev.Op(bw)
			line += fmt.Sprintf("  causal=%v fwd %4.0f bwd %4.0f", causal, f.FLOPs/c.TimeS/1e12, bw.FLOPs/cb.TimeS/1e12)
		}
		fmt.Println(line)
	}
}
