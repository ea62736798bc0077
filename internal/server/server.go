package server

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
)

// maxGone bounds the remembered IDs of deleted sandboxes, which answer
// "closed" rather than "not_found".
const maxGone = 4096

// Server is the HTTP API of execbox serve: it creates sandboxes from its
// runtimes, holds them by ID, and serves each one's endpoints under
// /v1/sandboxes/{id}/. It is an http.Handler, safe for concurrent use.
// Close closes every sandbox.
type Server struct {
	*core
	runtimes map[string]execbox.Runtime
	names    []string // in the order given; names[0] is the default

	mu        sync.Mutex
	closed    bool
	sandboxes map[string]*sandbox
	creating  sync.WaitGroup
	gone      map[string]api.SandboxInfo // the last state of ended sandboxes
	goneOrder []string
	live      int64 // sandboxes held or being created, for Max.Sandboxes
	tenancy   tenancy
	reaper    reaper
	pools     *poolSet
	restart   *restartState
}

// New returns a Server creating sandboxes from runtimes; the first is the
// default of create requests that name none.
func New(runtimes []execbox.Runtime, opts Options) (*Server, error) {
	if len(runtimes) == 0 {
		return nil, errors.New("server: no runtime")
	}
	opts = opts.withDefaults()
	s := &Server{
		core:      newCore(opts),
		runtimes:  make(map[string]execbox.Runtime),
		sandboxes: make(map[string]*sandbox),
		gone:      make(map[string]api.SandboxInfo),
	}
	s.serverRole = true
	s.mem = newMemBudget(opts)
	var err error
	if s.restart, err = openRestart(opts.StateDir, s.log); err != nil {
		return nil, err
	}
	for _, rt := range runtimes {
		if _, dup := s.runtimes[rt.Name()]; dup {
			return nil, fmt.Errorf("server: runtime %q given twice", rt.Name())
		}
		s.runtimes[rt.Name()] = rt
		s.names = append(s.names, rt.Name())
	}
	m := s.mux
	m.HandleFunc("GET /v1/health", s.health)
	m.HandleFunc("GET /v1/runtimes", s.listRuntimes)
	m.HandleFunc("POST /v1/sandboxes", s.create)
	m.HandleFunc("GET /v1/sandboxes", s.list)
	m.HandleFunc("GET /v1/sandboxes/{sandbox}", s.get)
	m.HandleFunc("DELETE /v1/sandboxes/{sandbox}", s.delete)
	registerSandboxRoutes(s.core, "/v1/sandboxes/{sandbox}/", s.lookup)
	m.HandleFunc("POST /v1/sandboxes/{sandbox}/commit", s.commit)
	m.HandleFunc("POST /v1/sandboxes/{sandbox}/timeout", s.setTimeout)
	s.registerImageRoutes()
	s.registerTokenRoutes()
	if err := s.setupTenants(); err != nil {
		return nil, err
	}
	s.registerMetrics()
	if err := s.startPools(opts.Pools); err != nil {
		return nil, err
	}
	s.startReaper()
	return s, nil
}

func (s *Server) lookup(r *http.Request) (*sandbox, error) {
	id := r.PathValue("sandbox")
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.visible(r, id) {
		return nil, noSandbox(id)
	}
	if sb, ok := s.sandboxes[id]; ok {
		return sb, nil
	}
	if info, ok := s.gone[id]; ok {
		return nil, endedError(info)
	}
	if err := s.restart.lostErr(id); err != nil {
		return nil, err
	}
	return nil, &execbox.FieldError{Field: "sandbox", Problem: "no sandbox " + strconv.Quote(id), Kind: execbox.ErrNotFound}
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		writeJSON(w, http.StatusServiceUnavailable, api.Health{Status: api.StatusUnavailable, Detail: "shutting down"})
		return
	}
	writeJSON(w, http.StatusOK, api.Health{Status: api.StatusOK})
}

func (s *Server) listRuntimes(w http.ResponseWriter, r *http.Request) {
	out := api.RuntimeList{Runtimes: make([]api.RuntimeInfo, len(s.names))}
	var wg sync.WaitGroup
	for i, name := range s.names {
		wg.Go(func() {
			rt := s.runtimes[name]
			h := rt.Health(r.Context())
			out.Runtimes[i] = api.RuntimeInfo{
				Name: name, Default: i == 0, Available: h.Available, Detail: h.Detail,
				Capabilities: api.NewCapabilities(rt.Capabilities()),
			}
		})
	}
	wg.Wait()
	writeJSON(w, http.StatusOK, out)
}

// create makes a sandbox: POST /v1/sandboxes[?runtime=NAME], body the
// api.Spec. Field errors are named relative to the spec.
func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("runtime")
	if name == "" {
		name = s.names[0]
	}
	rt, ok := s.runtimes[name]
	if !ok {
		writeError(w, r, s.log, &execbox.FieldError{
			Field: "runtime", Kind: execbox.ErrNotFound,
			Problem: fmt.Sprintf("this server has no runtime %q (it has: %s)", name, strings.Join(s.names, ", ")),
		})
		return
	}
	var wire api.Spec
	if err := readJSON(r, s.opts.MaxJSONBody, &wire, false); err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if wire.Pool != "" {
		s.createPooled(w, r, &wire)
		return
	}
	// Every problem of the request at once: the wire's, the spec's own,
	// the maximums' and the lifetimes'.
	spec, err := wire.Spec()
	err = errors.Join(err, spec.Validate(), s.optionsFor(r).Max.checkSpec(&spec))
	ls, lerr := s.lifespan(&spec)
	err = errors.Join(err, lerr)
	if err == nil && !s.opts.AllowHostPaths {
		err = hostPaths(&spec)
	}
	if err == nil {
		err = s.tenantImage(r, &spec)
	}
	if err == nil && s.opts.Policy != nil {
		err = s.allowCreate(r, name, &spec)
	}
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		writeError(w, r, s.log, fmt.Errorf("server is shutting down: %w", execbox.ErrUnavailable))
		return
	}
	if max := s.opts.Max.Sandboxes; max > 0 && s.live >= max {
		s.mu.Unlock()
		writeError(w, r, s.log, exhausted("sandboxes", max))
		return
	}
	res, err := s.reserve(r)
	if err != nil {
		s.mu.Unlock()
		writeError(w, r, s.log, err)
		return
	}
	defer res.release()
	s.live++ // counts creates in progress too, so parallel ones cannot pass the maximum
	s.creating.Add(1)
	s.mu.Unlock()
	defer s.creating.Done()
	kept := false
	defer func() {
		if !kept {
			s.mu.Lock()
			s.live--
			s.mu.Unlock()
		}
	}()

	start := time.Now()
	sb, err := rt.Create(tenantContext(r), spec)
	s.observeCreate(name, start, err)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if err := s.restart.hold(sb.ID(), name, principal(r).Tenant); err != nil {
		writeError(w, r, s.log, errors.Join(err, sb.Close()))
		return
	}
	st := newSandbox(sb, name, spec.Labels, s.optionsFor(r))
	s.startLife(st, ls)
	s.mu.Lock()
	_, dup := s.sandboxes[sb.ID()]
	closed := s.closed
	if !dup && !closed {
		s.sandboxes[sb.ID()] = st
		res.adopt(st)
		kept = true
	}
	s.mu.Unlock()
	if dup || closed {
		cerr := sb.Close()
		if !dup {
			s.restart.release(sb.ID())
		}
		err := fmt.Errorf("sandbox %s: the ID is taken", sb.ID())
		if closed {
			err = fmt.Errorf("server is shutting down: %w", execbox.ErrUnavailable)
		}
		writeError(w, r, s.log, errors.Join(err, cerr))
		return
	}
	st.log.Info("created", "runtime", name, "workspace", sb.Workspace())
	w.Header().Set("Location", "/v1/sandboxes/"+sb.ID())
	writeJSON(w, http.StatusCreated, st.liveInfo())
}

// hostPathsRefused is the problem of a request naming a path of the
// server's machine to a server that does not allow it.
const hostPathsRefused = "paths on the server's host are not allowed by this server (execbox serve --allow-host-paths)"

// hostPaths refuses the fields of spec that name host paths.
func hostPaths(spec *execbox.Spec) error {
	var errs []error
	refuse := func(field string) {
		errs = append(errs, &execbox.FieldError{Field: field, Kind: execbox.ErrPermission,
			Problem: hostPathsRefused})
	}
	if spec.Workspace != "" {
		refuse("workspace")
	}
	if localRef(spec.Image) {
		refuse("image") // an OCI layout or tarball of the host
	}
	for i, a := range spec.Assets {
		if a.Source != "" {
			refuse(fmt.Sprintf("assets[%d].source", i))
		}
	}
	return errors.Join(errs...)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	match, err := labelFilter(r)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	s.mu.Lock()
	out := api.SandboxList{Sandboxes: make([]api.SandboxInfo, 0, len(s.sandboxes))}
	for _, sb := range s.sandboxes {
		if s.visible(r, sb.info.ID) && match(sb.info.Labels) {
			out.Sandboxes = append(out.Sandboxes, sb.liveInfo())
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out.Sandboxes, func(a, b api.SandboxInfo) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	writeJSON(w, http.StatusOK, out)
}

// get describes a sandbox: GET /v1/sandboxes/{sandbox}; one that ended
// (and is still remembered) answers its last state.
func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	sb, err := s.lookup(r)
	if err != nil {
		if info, ok := s.ended(r.PathValue("sandbox")); ok && errors.Is(err, execbox.ErrClosed) {
			writeJSON(w, http.StatusOK, info)
			return
		}
		writeError(w, r, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, sb.liveInfo())
}

// delete closes a sandbox: DELETE /v1/sandboxes/{sandbox}. It returns
// once everything the sandbox started is gone. Its ID then answers
// "closed".
func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("sandbox")
	s.mu.Lock()
	sb, ok := s.sandboxes[id]
	if ok = ok && s.visible(r, id); ok {
		delete(s.sandboxes, id)
		s.forget(sb, api.EndDeleted, "")
	}
	s.mu.Unlock()
	if !ok {
		_, err := s.lookup(r)
		writeError(w, r, s.log, err)
		return
	}
	err := sb.sb.Close()
	sb.pooled.release()
	s.restart.release(id)
	s.mu.Lock()
	s.live-- // even if Close failed: the sandbox is no longer served
	s.mu.Unlock()
	s.observeClosed(sb.runtime, "deleted")
	if err != nil {
		writeError(w, r, s.log, fmt.Errorf("sandbox %s: close: %w", id, err))
		return
	}
	sb.log.Info("closed")
	w.WriteHeader(http.StatusNoContent)
}

// forget remembers sb as ended, for reason (see endedInfo), and returns
// its last state. s.mu is held.
func (s *Server) forget(sb *sandbox, reason api.EndReason, detail string) api.SandboxInfo {
	info := sb.endedInfo(reason, detail)
	s.gone[info.ID] = info
	s.goneOrder = append(s.goneOrder, info.ID)
	if len(s.goneOrder) > maxGone {
		delete(s.gone, s.goneOrder[0])
		s.disown(s.goneOrder[0])
		s.goneOrder = s.goneOrder[1:]
	}
	return info
}

// Close closes every sandbox, including those being created, and makes
// new create requests fail with "unavailable". It is idempotent. Stop
// the HTTP server first (http.Server.Shutdown) so no request is using a
// sandbox; requests still running see their sandbox closed.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.stopReaper()
	poolErr := s.pools.close()
	s.creating.Wait() // a create finishing now closes what it made
	s.mu.Lock()
	all := make([]*sandbox, 0, len(s.sandboxes))
	for id, sb := range s.sandboxes {
		all = append(all, sb)
		delete(s.sandboxes, id)
		s.forget(sb, api.EndShutdown, "")
		s.live--
	}
	s.mu.Unlock()
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, sb := range all {
		wg.Go(func() {
			if err := sb.sb.Close(); err != nil {
				errs[i] = fmt.Errorf("sandbox %s: close: %w", sb.info.ID, err)
			}
			sb.pooled.release()
			s.restart.release(sb.info.ID)
			s.observeClosed(sb.runtime, "shutdown")
		})
	}
	wg.Wait()
	if len(all) > 0 {
		s.log.Info("closed every sandbox", "count", len(all))
	}
	return errors.Join(append(errs, poolErr)...)
}

// NewSandboxHandler returns the HTTP API of one sandbox, its endpoints at
// /v1/ (GET /v1/health, POST /v1/exec, ...): what an agent inside a
// boundary serves. It never closes sb. runtime names the runtime in
// GET /v1/info.
func NewSandboxHandler(sb execbox.Sandbox, runtime string, opts Options) http.Handler {
	opts = opts.withDefaults()
	opts.Keys = nil   // one sandbox has no tenants: Token alone
	opts.Policy = nil // the server in front asks it
	c := newCore(opts)
	st := newSandbox(sb, runtime, nil, &c.opts)
	registerSandboxRoutes(c, "/v1/", func(*http.Request) (*sandbox, error) { return st, nil })
	return c
}
