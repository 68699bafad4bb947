package zzcancel

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eidolon-sim/eidolon/core/scenario"
	"github.com/eidolon-sim/eidolon/core/scenario/all"
)

func TestCancelLatency(t *testing.T) {
	js := `{"kind":"serving","model":"llama3-8b","gpu":"h100-sxm","cluster":{"preset":"dgx-h100","nodes":512},"tp":1,"replicas":4096,"workload":{"arrival":"poisson","rate_per_s":10000,"requests":100000,"prompt_tokens":512,"output_tokens":64}}`
	start := time.Now()
	var last float64
	_, _, err := all.Run(scenario.Env{Ctx: context.Background(), Progress: func(f float64) {
		e := time.Since(start).Seconds()
		if e-last > 0.3 {
			fmt.Printf("progress %.2f at %.2fs (gap %.2f)\n", f, e, e-last)
		}
		last = e
	}}, []byte(js))
	fmt.Println("total", time.Since(start), err)
	for _, d := range []float64{1, 3, 5, 7, 9, 11, 13} {
		ctx, cancel := context.WithCancel(context.Background())
		go func() { time.Sleep(time.Duration(d * float64(time.Second))); cancel() }()
		st := time.Now()
		_, _, err := all.Run(scenario.Env{Ctx: ctx}, []byte(js))
		el := time.Since(st).Seconds()
		fmt.Printf("cancel at %.0fs: returned at %.2fs (latency %.2f) %v\n", d, el, el-d, err != nil)
	}
}
