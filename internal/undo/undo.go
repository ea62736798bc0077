// Package undo keeps what reverses a creation made of several steps, so
// that a failure part way leaves nothing half-created: each step that
// makes something adds its undo, and a failure runs them, newest first.
//
//	var u undo.Stack
//	defer u.OnError(&err)
//	dir, err := os.MkdirTemp("", "x")
//	...
//	u.Add(func() { os.RemoveAll(dir) })
//
// A step must read only variables that keep what it undoes: never a
// named result of the function that adds it. A return statement assigns
// the results before the deferred unwind runs, so a step reading a
// named result "slot" after "return 0, err" frees slot 0, another
// sandbox's, and keeps its own. TestStepsReadNoNamedResult checks the
// module for it.
package undo

// Stack is the undo steps of one creation. The zero value is empty.
type Stack []func()

// Add adds the step that undoes what was just made.
func (s *Stack) Add(fn func()) { *s = append(*s, fn) }

// Run runs the steps, newest first, and forgets them.
func (s *Stack) Run() {
	for i := len(*s) - 1; i >= 0; i-- {
		(*s)[i]()
	}
	*s = nil
}

// OnError runs the steps if *err is not nil: deferred with the address of
// the function's named error result.
func (s *Stack) OnError(err *error) {
	if *err != nil {
		s.Run()
	}
}

// Release forgets the steps: what they would undo is now closed by
// someone else (the sandbox's Close).
func (s *Stack) Release() { *s = nil }
