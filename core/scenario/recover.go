package scenario

import (
	"fmt"
	"runtime/debug"
)

// PanicError is a recovered panic: a bug in Eidolon, not in the spec. The
// bindings report it as an InternalError with the stack of the goroutine
// that panicked.
type PanicError struct {
	Value any
	Stack string
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v\n%s", e.Value, e.Stack) }

// Recover, deferred at the top of a goroutine (or of a function running
// one unit of work), turns a panic into a *PanicError stored in *err.
// Every goroutine in core/ defers it: an unrecovered panic outside the
// binding's own goroutine would abort the Python interpreter.
func Recover(err *error) {
	if r := recover(); r != nil {
		*err = &PanicError{Value: r, Stack: string(debug.Stack())}
	}
}
