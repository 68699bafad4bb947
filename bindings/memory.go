package bindings

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"sync"
	"syscall"
)

// DefaultMaxMemoryBytes is the memory a run may be estimated to need when
// neither the caller nor the spec sets a limit: half of this machine's
// physical memory, or of what the process's address-space limit
// (RLIMIT_AS) leaves beyond what it has mapped already (Python, its
// libraries, the Go runtime's reservations) when that is lower. Half,
// because the estimate is rough and the process (a notebook kernel) holds
// other data too.
func DefaultMaxMemoryBytes() float64 {
	limit := math.Inf(1)
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) == nil && si.Totalram > 0 {
		limit = float64(si.Totalram) * float64(si.Unit)
	}
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_AS, &rl) == nil && rl.Cur != math.MaxUint64 {
		left := float64(rl.Cur) - mappedBytes()
		limit = math.Min(limit, math.Max(left, 1)) // exhausted: refuse all
	}
	if math.IsInf(limit, 1) {
		return 0 // unknown: no limit
	}
	return limit / 2
}

// machineBytes is this machine's memory, or what the address-space limit
// leaves (twice DefaultMaxMemoryBytes; 0: unknown): the most a memory
// limit may allow.
func machineBytes() float64 { return 2 * DefaultMaxMemoryBytes() }

// mappedBytes is the process's virtual size (/proc/self/statm's first
// field, in pages); 0 where it cannot be read.
func mappedBytes() float64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	var pages float64
	if _, err := fmt.Sscan(string(b), &pages); err != nil {
		return 0
	}
	return pages * float64(os.Getpagesize())
}

// softLimitShare of what DefaultMaxMemoryBytes halves (the machine's
// memory, or what the address-space limit leaves) is the Go runtime's soft
// memory limit: past it the collector runs harder instead of letting the
// heap grow to twice its live size (GOGC's headroom), which for a run
// estimated near the default limit would reach the machine's memory and
// kill the interpreter. A GOMEMLIMIT in the environment is left as set.
const softLimitShare = 0.9

var softLimitOnce sync.Once

// setSoftMemoryLimit sets the runtime's soft memory limit once (see
// softLimitShare).
func setSoftMemoryLimit() {
	softLimitOnce.Do(func() {
		if os.Getenv("GOMEMLIMIT") != "" {
			return
		}
		if m := machineBytes(); m > 0 {
			debug.SetMemoryLimit(int64(softLimitShare * m))
		}
	})
}

// FreeMemory returns what the Go heap no longer uses to the OS (a forced
// collection). Python calls it after dropping a large result's bundle: the
// hook gopy installs to collect after every Python collection is removed
// (python/eidolon/_engine.py), so nothing else would collect the bundle
// before the next run allocates. It returns no error (nil): gopy gives a
// function without results a goRun parameter, one with an error none.
func FreeMemory() error {
	debug.FreeOSMemory()
	return nil
}
