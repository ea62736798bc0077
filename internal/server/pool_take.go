package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"reflect"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
)

// lateBinding is what a create naming a pool may vary, bound to the
// sandbox when it is taken: everything else was fixed when it was made.
type lateBinding struct {
	env    map[string]string // default env of its commands (see lateEnv)
	labels map[string]string // over the template's
	files  []execbox.Asset   // written into the workspace, content only
	// life is the sandbox's lifetimes, from the take (the request's
	// timeout_ms and idle_timeout_ms, or the server's defaults): a warm
	// sandbox's life starts when it is taken. The tenant, as for any
	// create, is the caller's (reserveLive, register): a pool's
	// sandboxes are never shared between tenants, since a taken one
	// never returns to the pool.
	life lifespan
}

// createPooled serves POST /v1/sandboxes with spec.pool set: it takes a
// warm sandbox from the pool, or makes one from the template as the
// pool's fallback says, then binds what the request varies.
func (s *Server) createPooled(w http.ResponseWriter, r *http.Request, wire *api.Spec) {
	start := time.Now()
	runtime := ""
	fail := func(err error) {
		if f := s.opts.Observer.Create; f != nil {
			f(CreateStats{Runtime: runtime, Pool: wire.Pool, Outcome: "error:" + string(api.CodeOf(err)), Duration: time.Since(start)})
		}
		writeError(w, r, s.log, err)
	}
	p, late, err := s.checkTake(r, wire)
	if err != nil {
		fail(err)
		return
	}
	runtime = p.def.Runtime
	defer p.poke() // after the answer is written: refill
	res, err := s.reserveLive(r)
	if err != nil {
		fail(err)
		return
	}
	defer s.creating.Done()
	defer res.release()
	sb, hit, err := p.take(r.Context())
	if f := s.opts.Observer.Acquire; f != nil {
		f(AcquireStats{Pool: p.def.Name, Hit: hit, Duration: time.Since(start)})
	}
	if err == nil {
		err = late.bind(r.Context(), sb)
	}
	var st *sandbox
	if err == nil {
		st = newSandbox(sb, runtime, late.labels, s.optionsFor(r))
		st.info.Pool = p.def.Name
		st.pooled = &pooled{pool: p, env: late.env}
		s.startLife(st, late.life)
		err = s.register(st, res)
	}
	if err != nil {
		s.unreserve()
		if sb != nil {
			err = errors.Join(err, sb.Close()) // never back to the pool
			p.released()
		}
		fail(err)
		return
	}
	outcome := "created"
	if hit {
		outcome = "pooled"
	}
	if f := s.opts.Observer.Create; f != nil {
		f(CreateStats{Runtime: runtime, Pool: p.def.Name, Outcome: outcome, Duration: time.Since(start)})
	}
	st.log.Info("taken from a warm pool", "pool", p.def.Name, "warm", hit, "runtime", runtime)
	w.Header().Set("Location", "/v1/sandboxes/"+sb.ID())
	writeJSON(w, http.StatusCreated, st.liveInfo())
	_ = http.NewResponseController(w).Flush() // the answer out before the refill starts
}

// checkTake finds the pool a create names and checks the rest of its
// spec: empty or equal to the template, but what is bound late.
func (s *Server) checkTake(r *http.Request, wire *api.Spec) (*pool, lateBinding, error) {
	spec, err := wire.Spec()
	if err == nil {
		err = spec.Validate()
	}
	if err != nil {
		return nil, lateBinding{}, err
	}
	p, err := s.pools.get(spec.Pool)
	if err != nil {
		return nil, lateBinding{}, err
	}
	var errs []error
	if rt := r.URL.Query().Get("runtime"); rt != "" && rt != p.def.Runtime {
		errs = append(errs, execbox.Invalid("runtime", "pool %q makes its sandboxes on runtime %q, not %q", p.def.Name, p.def.Runtime, rt))
	}
	errs = append(errs, mismatches(p, &spec)...)
	if o := s.optionsFor(r); o != &s.opts {
		errs = append(errs, withinKey(p, &o.Max))
	}
	for i, a := range spec.Assets {
		if a.Source != "" {
			errs = append(errs, execbox.Invalid(fmt.Sprintf("assets[%d].source", i),
				"a sandbox taken from a pool takes files with content only"))
		}
	}
	labels := maps.Clone(p.template.Labels)
	if len(spec.Labels) > 0 {
		labels = maps.Clone(spec.Labels)
		for k, v := range p.template.Labels {
			if _, ok := labels[k]; !ok {
				labels[k] = v
			}
		}
	}
	late := lateBinding{env: spec.Env, labels: labels, files: spec.Assets}
	late.life, err = s.lifespan(&spec)
	if err := errors.Join(append(errs, err)...); err != nil {
		return p, late, err
	}
	if s.opts.Policy != nil {
		err = s.allowCreate(r, p.def.Runtime, &spec)
	}
	return p, late, err
}

// mismatches names each field of spec that is set and differs from the
// pool's template: a warm sandbox cannot change it.
func mismatches(p *pool, spec *execbox.Spec) []error {
	t := &p.asked
	var errs []error
	for _, f := range []struct {
		field     string
		got, want any
	}{
		{"workspace", spec.Workspace, t.Workspace},
		{"allow_system_workspace", spec.AllowSystemWorkspace, t.AllowSystemWorkspace},
		{"image", spec.Image, t.Image},
		{"setup", spec.Setup, t.Setup},
		{"env_policy", spec.EnvPolicy, t.EnvPolicy},
		{"env_allow", spec.EnvAllow, t.EnvAllow},
		{"limits", spec.Limits, t.Limits},
		{"user", spec.User, t.User},
	} {
		if !empty(f.got) && !reflect.DeepEqual(f.got, f.want) {
			errs = append(errs, execbox.Invalid(f.field,
				"differs from the template of pool %q (leave it out: a warm sandbox is made already)", p.def.Name))
		}
	}
	return errs
}

// withinKey refuses a take by a key with maximums of its own whose
// pool's template is over them: a limit above the key's maximum, or none
// where the key has one. A create by the key would be refused the first
// and given its maximum for the second; a warm sandbox's limits are made
// already, so the take is refused.
func withinKey(p *pool, m *Maximums) error {
	t, x := p.template.Limits, m.Limits
	var errs []error
	check := func(field string, got, max int64) {
		if max > 0 && (got == 0 || got > max) {
			v := any(got)
			if got == 0 {
				v = "no limit"
			}
			errs = append(errs, execbox.Invalid("limits."+field,
				"the template of pool %q has %v, over this key's maximum of %v", p.def.Name, v, max))
		}
	}
	check("cpu_time_ms", t.CPUTime.Milliseconds(), x.CPUTime.Milliseconds())
	check("file_size", t.FileSize, x.FileSize)
	check("open_files", t.OpenFiles, x.OpenFiles)
	check("address_space", t.AddressSpace, x.AddressSpace)
	check("memory", t.Memory, x.Memory)
	check("pids", t.PIDs, x.PIDs)
	if x.CPUs > 0 && (t.CPUs == 0 || t.CPUs > x.CPUs) {
		errs = append(errs, execbox.Invalid("limits.cpus",
			"the template of pool %q has %v, over this key's maximum of %v", p.def.Name, t.CPUs, x.CPUs))
	}
	return errors.Join(errs...)
}

// empty reports whether v is its type's zero value or an empty slice.
func empty(v any) bool {
	rv := reflect.ValueOf(v)
	return !rv.IsValid() || rv.IsZero() || (rv.Kind() == reflect.Slice && rv.Len() == 0)
}

// bind writes the take's files into sb's workspace, as assets would
// have been at create.
func (l *lateBinding) bind(ctx context.Context, sb execbox.Sandbox) error {
	for i, a := range l.files {
		mode := fs.FileMode(a.Mode)
		if mode == 0 {
			mode = 0o644
		}
		err := sb.Files().WriteFile(ctx, a.Path, a.Content, execbox.WriteOptions{Mode: mode, Parents: true})
		var fe *execbox.FieldError
		switch {
		case errors.As(err, &fe):
			return execbox.PrefixFields(fmt.Sprintf("assets[%d].", i), err)
		case err != nil:
			return fmt.Errorf("assets[%d] %s: %w", i, a.Path, err)
		}
	}
	return nil
}

// reserveLive counts one more sandbox held or being made, as create
// does, against the server's maximum and the caller's key's (reserve),
// failing when the server is closing or at either; unreserve undoes the
// server's count, res.release the key's. The caller calls
// s.creating.Done when done.
func (s *Server) reserveLive(r *http.Request) (*reservation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("server is shutting down: %w", execbox.ErrUnavailable)
	}
	if max := s.opts.Max.Sandboxes; max > 0 && s.live >= max {
		return nil, exhausted("sandboxes", max)
	}
	res, err := s.reserve(r)
	if err != nil {
		return nil, err
	}
	s.live++
	s.creating.Add(1)
	return res, nil
}

func (s *Server) unreserve() {
	s.mu.Lock()
	s.live--
	s.mu.Unlock()
}

// register makes st served under its ID, owned by res's tenant, unless
// the ID is taken or the server is closing.
func (s *Server) register(st *sandbox, res *reservation) error {
	if err := s.restart.hold(st.info.ID, st.runtime, res.tenant); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	switch {
	case s.closed:
		err = fmt.Errorf("server is shutting down: %w", execbox.ErrUnavailable)
	case s.sandboxes[st.info.ID] != nil:
		return fmt.Errorf("sandbox %s: the ID is taken", st.info.ID) // the record is the holder's
	}
	if err != nil {
		s.restart.release(st.info.ID)
		return err
	}
	s.sandboxes[st.info.ID] = st
	res.adopt(st)
	return nil
}
