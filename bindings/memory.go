package bindings

import (
	"math"
	"syscall"
)

// DefaultMaxMemoryBytes is the memory a run may be estimated to need when
// neither the caller nor the spec sets a limit: half of this machine's
// physical memory, or of the process's address-space limit (RLIMIT_AS)
// when that is lower. Half, because the estimate is rough and the process
// (a notebook kernel) holds other data too.
func DefaultMaxMemoryBytes() float64 {
	limit := math.Inf(1)
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) == nil && si.Totalram > 0 {
		limit = float64(si.Totalram) * float64(si.Unit)
	}
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_AS, &rl) == nil && rl.Cur != math.MaxUint64 && float64(rl.Cur) < limit {
		limit = float64(rl.Cur)
	}
	if math.IsInf(limit, 1) {
		return 0 // unknown: no limit
	}
	return limit / 2
}
