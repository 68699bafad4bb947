package fidelity

import (
	"os"
	"runtime/debug"
	"testing"

	"github.com/eidolon-sim/eidolon/bindings"
)

// TestMain gives the reports' process a soft memory limit of 60 % of the
// machine's memory (unless GOMEMLIMIT says otherwise). The MoE report's
// largest rows (512 micro-batches a rank on 256 GPUs) hold 6–8 GB of
// tasks each while alive, two run at once (rowsInParallel) and the dense
// report runs beside them: with GOGC's headroom of twice the live heap the
// process peaked at 20–24 GB on a 24 GiB machine and was once killed for
// it; past the limit the collector runs harder instead. The machine's
// memory is the bindings' (twice their default run limit: physical
// memory, or what the address-space limit leaves).
func TestMain(m *testing.M) {
	if os.Getenv("GOMEMLIMIT") == "" {
		if machine := 2 * bindings.DefaultMaxMemoryBytes(); machine > 0 {
			debug.SetMemoryLimit(int64(0.6 * machine))
		}
	}
	os.Exit(m.Run())
}
