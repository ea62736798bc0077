package server

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
)

// poolSet is a Server's warm pools by name.
type poolSet struct {
	mu     sync.Mutex
	closed bool
	m      map[string]*pool
}

// startPools registers the pool routes and defines the pools a Server
// starts with; any problem stops them all, named "pools[i].FIELD".
func (s *Server) startPools(defs []api.Pool) error {
	s.pools = &poolSet{m: make(map[string]*pool)}
	s.registerPoolRoutes()
	var errs []error
	for i, def := range defs {
		if err := s.definePool(def); err != nil {
			errs = append(errs, execbox.PrefixFields(fmt.Sprintf("pools[%d].", i), err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return errors.Join(err, s.pools.close())
	}
	return nil
}

// definePool checks def against this server (runtime, host paths,
// maximums) and starts the pool.
func (s *Server) definePool(def api.Pool) error {
	asked, err := def.Validate()
	if def.Runtime == "" {
		def.Runtime = s.names[0]
	}
	rt, ok := s.runtimes[def.Runtime]
	if !ok {
		err = errors.Join(err, &execbox.FieldError{
			Field: "runtime", Kind: execbox.ErrNotFound,
			Problem: fmt.Sprintf("this server has no runtime %q (it has: %s)", def.Runtime, strings.Join(s.names, ", ")),
		})
	}
	if err != nil {
		return err
	}
	template := asked
	template.Labels = maps.Clone(asked.Labels)
	if !s.opts.AllowHostPaths {
		err = hostPaths(&template)
	}
	if err == nil {
		err = s.opts.Max.checkSpec(&template)
	}
	if err == nil {
		// Limits the runtime cannot enforce would fail every create: say
		// so now rather than in the pool's last error.
		err = execbox.CheckLimits(def.Runtime, rt.Capabilities(), template.Limits, "limits.")
	}
	if err != nil {
		return execbox.PrefixFields("spec.", err)
	}
	if def.Fallback == "" {
		def.Fallback = api.FallbackCreate
	}
	ps := s.pools
	ps.mu.Lock()
	defer ps.mu.Unlock()
	switch {
	case ps.closed:
		return fmt.Errorf("server is shutting down: %w", execbox.ErrUnavailable)
	case ps.m[def.Name] != nil:
		return execbox.Invalid("name", "a pool named %q exists (delete it first)", def.Name)
	}
	ps.m[def.Name] = newPool(def, rt, asked, template, s.log)
	s.log.Info("warm pool defined", "pool", def.Name, "runtime", def.Runtime,
		"initial", def.Initial, "min_idle", def.MinIdle, "max", def.Max)
	return nil
}

func (ps *poolSet) get(name string) (*pool, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if p := ps.m[name]; p != nil {
		return p, nil
	}
	return nil, &execbox.FieldError{Field: "pool", Kind: execbox.ErrNotFound,
		Problem: "no pool " + strconv.Quote(name)}
}

// remove takes the pool out of the set and closes it.
func (ps *poolSet) remove(name string) error {
	ps.mu.Lock()
	p := ps.m[name]
	delete(ps.m, name)
	ps.mu.Unlock()
	if p == nil {
		return &execbox.FieldError{Field: "pool", Kind: execbox.ErrNotFound,
			Problem: "no pool " + strconv.Quote(name)}
	}
	return p.close()
}

// close closes every pool and refuses new ones. It is idempotent.
func (ps *poolSet) close() error {
	ps.mu.Lock()
	ps.closed = true
	all := slices.Collect(maps.Values(ps.m))
	clear(ps.m)
	ps.mu.Unlock()
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, p := range all {
		wg.Go(func() { errs[i] = p.close() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// PoolStats reports every pool's definition and counts, ordered by name:
// what a metrics collector reads.
func (s *Server) PoolStats() []api.PoolStatus {
	s.pools.mu.Lock()
	all := slices.Collect(maps.Values(s.pools.m))
	s.pools.mu.Unlock()
	out := make([]api.PoolStatus, len(all))
	for i, p := range all {
		out[i] = p.status()
	}
	slices.SortFunc(out, func(a, b api.PoolStatus) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// mayManagePools says whether the caller of r may define and delete
// pools: admins only (adminRoutes lists the routes, so a tenant's key is
// refused before its body is read; this is the same rule, checked again
// where it matters).
func (s *Server) mayManagePools(r *http.Request) error {
	if !principal(r).Admin {
		return fmt.Errorf("pools are shared by every tenant: defining or deleting one needs an admin key: %w", execbox.ErrPermission)
	}
	return nil
}

func (s *Server) registerPoolRoutes() {
	s.mux.HandleFunc("GET /v1/pools", s.listPools)
	s.mux.HandleFunc("POST /v1/pools", s.postPool)
	s.mux.HandleFunc("GET /v1/pools/{pool}", s.getPool)
	s.mux.HandleFunc("DELETE /v1/pools/{pool}", s.deletePool)
}

func (s *Server) listPools(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, api.PoolList{Pools: s.PoolStats()})
}

// postPool defines a pool: POST /v1/pools, body the api.Pool. It answers
// at once; the pool fills in the background.
func (s *Server) postPool(w http.ResponseWriter, r *http.Request) {
	err := s.mayManagePools(r)
	var def api.Pool
	if err == nil {
		err = readJSON(r, s.opts.MaxJSONBody, &def, true)
	}
	if err == nil {
		err = s.definePool(def)
	}
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	p, err := s.pools.get(def.Name)
	if err != nil { // deleted meanwhile
		writeError(w, r, s.log, err)
		return
	}
	w.Header().Set("Location", "/v1/pools/"+def.Name)
	writeJSON(w, http.StatusCreated, p.status())
}

func (s *Server) getPool(w http.ResponseWriter, r *http.Request) {
	p, err := s.pools.get(r.PathValue("pool"))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, p.status())
}

// deletePool removes a pool and closes its idle sandboxes: DELETE
// /v1/pools/{pool}. Sandboxes taken from it stay their callers'.
func (s *Server) deletePool(w http.ResponseWriter, r *http.Request) {
	err := s.mayManagePools(r)
	if err == nil {
		err = s.pools.remove(r.PathValue("pool"))
	}
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
