package execbox

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// ProbeTimeout bounds one live probe of a runtime.
const ProbeTimeout = 30 * time.Second

// Probe checks that rt really runs commands on this machine: it creates
// a sandbox with the zero Spec, runs `true` in it and closes it. Health
// says whether a runtime's prerequisites are present; only a probe shows
// that the whole path works (a cgroup layout Health did not foresee fails
// here, not in the user's first command). It returns nil on success, or
// an error saying which step failed.
func Probe(ctx context.Context, rt Runtime) error {
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	sb, err := rt.Create(ctx, Spec{})
	if err != nil {
		return fmt.Errorf("probe: create: %w", err)
	}
	res, err := sb.Exec(ctx, ExecRequest{Command: []string{"true"}})
	cerr := sb.Close()
	switch {
	case err != nil:
		return fmt.Errorf("probe: exec true: %w", err)
	case !res.Success():
		return fmt.Errorf("probe: exec true: %s: %w", res.String(), ErrUnavailable)
	case cerr != nil:
		return fmt.Errorf("probe: close: %w", cerr)
	}
	return nil
}

// probeCache holds the outcome of one Probe per runtime name and
// settings, for the life of the process: the machine does not change
// under a running execbox often enough to pay a probe per OpenDefault.
var probeCache sync.Map // probeKey -> *probeEntry

type probeKey struct {
	reg      *Registry
	name     string
	settings string
}

type probeEntry struct {
	once sync.Once
	err  error
}

// probeOnce runs Probe on rt at most once per process for the runtime
// called name with opts' settings, and returns its outcome. A probe cut
// short by ctx, or failed for want of a resource, is not cached.
func (r *Registry) probeOnce(ctx context.Context, name string, opts Options, rt Runtime) error {
	settings, err := json.Marshal(opts.Settings)
	if err != nil {
		return Probe(ctx, rt)
	}
	k := probeKey{reg: r, name: name, settings: string(settings)}
	v, _ := probeCache.LoadOrStore(k, &probeEntry{})
	e := v.(*probeEntry)
	e.once.Do(func() { e.err = Probe(ctx, rt) })
	if e.err != nil && (ctx.Err() != nil || exhausted(e.err)) {
		probeCache.CompareAndDelete(k, e)
	}
	return e.err
}
