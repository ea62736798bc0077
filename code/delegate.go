package code

import (
	"context"
	"errors"
	"reflect"
)

// Delegate is implemented by sandboxes that can run a whole Request
// where they are, in one call: client.Sandbox (and so the remote
// runtime's sandboxes, and the agent-backed ones of the sandbox and
// docker runtimes) sends it as POST code to the execbox server or agent,
// which runs it with Run there. A run otherwise takes a dozen calls
// (probes, mkdir, writes, compile, run), each a round trip.
//
// The result is the one Run would return in process: the same phases,
// toolchain, command, limits and outputs.
type Delegate interface {
	RunCode(ctx context.Context, req Request) (Result, error)
}

// ErrNotDelegated is returned by a Delegate that cannot run a request in
// one call (its server predates POST code); the run then goes step by
// step through the Sandbox interface.
var ErrNotDelegated = errors.New("code: the sandbox cannot run a request in one call")

// delegate runs req through r's sandbox's Delegate when there is one and
// r has no options the Delegate could not carry (a Runner with Options
// runs step by step). ok is false when the run is not delegated.
func (r *Runner) delegate(ctx context.Context, req Request) (res Result, ok bool, err error) {
	d, is := r.sb.(Delegate)
	if !is || !reflect.ValueOf(r.opts).IsZero() || req.Stdout != nil || req.Stderr != nil {
		return Result{}, false, nil
	}
	res, err = d.RunCode(ctx, req)
	if errors.Is(err, ErrNotDelegated) {
		return Result{}, false, nil
	}
	return res, true, err
}
