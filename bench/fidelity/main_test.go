package fidelity

import (
	"fmt"
	"os"
	"runtime/debug"
	"testing"
)

// TestMain gives the reports' process a soft memory limit of 60 % of the
// machine's memory (unless GOMEMLIMIT says otherwise). The MoE report's
// largest rows (512 micro-batches a rank on 256 GPUs) hold 6–8 GB of
// tasks each while alive, two run at once (rowsInParallel) and the dense
// report runs beside them: with GOGC's headroom of twice the live heap the
// process peaked at 20–24 GB on a 24 GiB machine and was once killed for
// it; past the limit the collector runs harder instead.
func TestMain(m *testing.M) {
	if os.Getenv("GOMEMLIMIT") == "" {
		if total := machineMemoryBytes(); total > 0 {
			debug.SetMemoryLimit(int64(0.6 * total))
		}
	}
	os.Exit(m.Run())
}

// machineMemoryBytes is /proc/meminfo's MemTotal, 0 where it cannot be read.
func machineMemoryBytes() float64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	var kib float64
	if _, err := fmt.Sscanf(string(b), "MemTotal: %f kB", &kib); err != nil {
		return 0
	}
	return kib * 1024
}
