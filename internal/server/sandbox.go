package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
)

// Bounds of the per-sandbox bookkeeping.
const (
	// maxEnded is how many ended processes a sandbox without its own
	// process table keeps for re-reading (as the agent does).
	maxEnded = 64
	// cancelMemory is how long a cancel of an exec ID the server has not
	// seen yet is remembered, for an exec request that arrives after it.
	cancelMemory = time.Minute
	// maxCanceled bounds the remembered cancels.
	maxCanceled = 1024
)

// processTable is implemented by sandboxes that keep their started
// processes by ID (internal/agent.Sandbox and the runtimes embedding it).
type processTable interface {
	Process(id string) (execbox.Process, error)
}

// processAttacher is implemented by sandboxes whose processes are kept by
// an agent they reach over the protocol (client.Sandbox, the runtimes
// built on it): the agent's table is the only one, and a process it does
// not know fails there with ErrNotFound.
type processAttacher interface {
	Attach(id string) execbox.Process
}

// sandbox is the server side of one sandbox: what its endpoints need
// beyond execbox.Sandbox.
type sandbox struct {
	sb      execbox.Sandbox
	info    api.SandboxInfo
	runtime string
	log     *slog.Logger
	opts    *Options
	table   processTable    // nil: attach or procs below is the table
	attach  processAttacher // nil: procs below is the table
	life    *life           // a Server's sandbox's lifetime; nil for an agent's
	pooled  *pooled         // nil: not taken from a warm pool

	mu       sync.Mutex
	procs    map[string]execbox.Process
	ended    []string
	execs    map[string]context.CancelCauseFunc
	canceled map[string]time.Time
	running  int64 // processes and execs running, for Maximums.Processes

	coder lazyRunner // POST code's Runner, under maximum limits
}

func newSandbox(sb execbox.Sandbox, runtime string, labels map[string]string, opts *Options) *sandbox {
	caps := api.NewCapabilities(sb.Capabilities())
	s := &sandbox{
		sb:      sb,
		runtime: runtime,
		info: api.SandboxInfo{
			ID: sb.ID(), Runtime: runtime, Workspace: sb.Workspace(), Labels: labels, CreatedAt: time.Now().UTC(),
			Capabilities: &caps,
		},
		log:   opts.Logger.With("sandbox", sb.ID()),
		opts:  opts,
		procs: make(map[string]execbox.Process),
		execs: make(map[string]context.CancelCauseFunc),
	}
	s.table, _ = sb.(processTable)
	s.attach, _ = sb.(processAttacher)
	return s
}

// sandboxHandler is a per-sandbox endpoint.
type sandboxHandler func(s *sandbox, w http.ResponseWriter, r *http.Request)

// sandboxRoutes are the per-sandbox endpoints, relative to the sandbox's
// base path: /v1/ for an agent, /v1/sandboxes/{sandbox}/ for a server.
var sandboxRoutes = []struct {
	method, path string
	fn           sandboxHandler
}{
	{"GET", "health", (*sandbox).health},
	{"GET", "info", (*sandbox).getInfo},
	{"POST", "exec", (*sandbox).exec},
	{"POST", "exec/{exec}/cancel", (*sandbox).cancelExec},
	{"POST", "processes", (*sandbox).start},
	{"GET", "processes/{process}", (*sandbox).poll},
	{"GET", "processes/{process}/events", (*sandbox).events},
	{"POST", "processes/{process}/stdin", (*sandbox).stdin},
	{"POST", "processes/{process}/stdin/close", (*sandbox).closeStdin},
	{"POST", "processes/{process}/signal", (*sandbox).signal},
	{"POST", "processes/{process}/kill", (*sandbox).kill},
	{"GET", "processes/{process}/wait", (*sandbox).wait},
	{"POST", "sessions", (*sandbox).openSession},
	{"GET", "sessions", (*sandbox).listSessions},
	{"GET", "sessions/{session}", (*sandbox).getSession},
	{"DELETE", "sessions/{session}", (*sandbox).closeSession},
	{"POST", "sessions/{session}/run", (*sandbox).run},
	{"POST", "sessions/{session}/run/{run}/cancel", (*sandbox).cancelRun},
	{"POST", "sessions/{session}/write", (*sandbox).write},
	{"POST", "sessions/{session}/resize", (*sandbox).resize},
	{"GET", "sessions/{session}/events", (*sandbox).sessionEvents},
	{"GET", "sessions/{session}/wait", (*sandbox).waitSession},
	{"GET", "files", (*sandbox).readFile},
	{"PUT", "files", (*sandbox).writeFile},
	{"DELETE", "files", (*sandbox).remove},
	{"GET", "files/stat", (*sandbox).stat},
	{"GET", "files/list", (*sandbox).list},
	{"POST", "files/mkdir", (*sandbox).mkdir},
	{"PUT", "files/tar", (*sandbox).upload},
	{"GET", "files/tar", (*sandbox).download},
	{"GET", "snapshot", (*sandbox).snapshot},
	{"POST", "code", (*sandbox).runCode},
	{"POST", "git/{op}", (*sandbox).runGit},
}

// registerSandboxRoutes adds the per-sandbox endpoints under base, with
// get finding the sandbox of a request.
func registerSandboxRoutes(c *core, base string, get func(r *http.Request) (*sandbox, error)) {
	for _, rt := range sandboxRoutes {
		fn, touch := rt.fn, touches(rt.method, rt.path)
		c.mux.HandleFunc(rt.method+" "+base+rt.path, func(w http.ResponseWriter, r *http.Request) {
			s, err := get(r)
			if err != nil {
				writeError(w, r, c.log, err)
				return
			}
			if touch {
				s.touch()
				defer s.touch()
			}
			fn(s, w, r)
		})
	}
}

func (s *sandbox) fail(w http.ResponseWriter, r *http.Request, err error) {
	writeError(w, r, s.log, s.sawError(r.Context(), err))
}

func (s *sandbox) health(w http.ResponseWriter, r *http.Request) {
	info := s.liveInfo()
	if _, err := s.sb.Files().Stat(r.Context(), "."); err != nil {
		if err = s.sawError(r.Context(), err); errors.Is(err, execbox.ErrClosed) {
			writeError(w, r, s.log, err)
			return
		}
		writeJSON(w, http.StatusServiceUnavailable, api.Health{Status: api.StatusUnavailable, Detail: err.Error(), Sandbox: &info})
		return
	}
	writeJSON(w, http.StatusOK, api.Health{Status: api.StatusOK, Sandbox: &info})
}

func (s *sandbox) getInfo(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.liveInfo())
}

// Processes.

func (s *sandbox) start(w http.ResponseWriter, r *http.Request) {
	var wire api.ExecRequest
	if err := readJSON(r, s.opts.MaxJSONBody, &wire, true); err != nil {
		s.fail(w, r, err)
		return
	}
	req, err := wire.ExecRequest()
	req.Env = s.lateEnv(req.Env)
	err = checkedExec(&req, err, &s.opts.Max)
	if err == nil && s.opts.Policy != nil {
		err = s.allowExec(r, api.ActionStart, &req)
	}
	if err == nil {
		err = s.acquire()
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p, err := s.sb.Start(r.Context(), req)
	if err != nil {
		s.release()
		s.fail(w, r, err)
		return
	}
	s.releaseWhenDone(p)
	if s.table == nil && s.attach == nil {
		s.keep(p)
	}
	s.log.Debug("started", "process", p.ID())
	w.Header().Set("Location", r.URL.Path+"/"+p.ID())
	writeJSON(w, http.StatusCreated, api.ProcessStatus{ID: p.ID(), Running: true})
}

// keep adds p to the sandbox's own process table, and forgets it a while
// after it ends.
func (s *sandbox) keep(p execbox.Process) {
	s.mu.Lock()
	s.procs[p.ID()] = p
	s.mu.Unlock()
	go func() {
		// Wait ends with the process, or with ErrClosed when the sandbox
		// closes: either way it is over.
		_, _ = p.Wait(context.Background())
		s.mu.Lock()
		defer s.mu.Unlock()
		s.ended = append(s.ended, p.ID())
		for len(s.ended) > maxEnded {
			delete(s.procs, s.ended[0])
			s.ended = s.ended[1:]
		}
	}()
}

func (s *sandbox) process(r *http.Request) (execbox.Process, error) {
	id := r.PathValue("process")
	if s.table != nil {
		return s.table.Process(id)
	}
	if s.attach != nil {
		if !validID(id) {
			return nil, &execbox.FieldError{Field: "process", Problem: "no process " + strconv.Quote(id), Kind: execbox.ErrNotFound}
		}
		return s.attach.Attach(id), nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.procs[id]; ok {
		return p, nil
	}
	return nil, &execbox.FieldError{Field: "process", Problem: "no process " + strconv.Quote(id), Kind: execbox.ErrNotFound}
}

// withProcess wraps the process endpoints.
func (s *sandbox) withProcess(w http.ResponseWriter, r *http.Request, fn func(p execbox.Process)) {
	p, err := s.process(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	fn(p)
}

// holdResult reserves, for a started process's result about to be
// written, the bytes of its outputs: a caller fetching many results it
// does not read is refused (the process keeps its result: a later poll
// gets it) rather than left holding them all.
func holdResult(r *http.Request, res execbox.Result) (*hold, error) {
	return reserve(r, "a process's result", "output_limit", int64(len(res.Stdout.Data)+len(res.Stderr.Data)))
}

func (s *sandbox) poll(w http.ResponseWriter, r *http.Request) {
	s.withProcess(w, r, func(p execbox.Process) {
		res, err := p.Poll(r.Context())
		var h *hold
		if err == nil && res != nil {
			h, err = holdResult(r, *res)
		}
		defer h.release()
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeStatusResponse(w, r, p.ID(), res)
	})
}

func (s *sandbox) wait(w http.ResponseWriter, r *http.Request) {
	s.withProcess(w, r, func(p execbox.Process) {
		res, err := p.Wait(r.Context())
		var h *hold
		if err == nil {
			h, err = holdResult(r, res)
		}
		defer h.release()
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeResultResponse(w, r, res)
	})
}

func (s *sandbox) kill(w http.ResponseWriter, r *http.Request) {
	s.withProcess(w, r, func(p execbox.Process) {
		if err := p.Kill(r.Context()); err != nil {
			s.fail(w, r, err)
			return
		}
		res, err := p.Poll(r.Context())
		var h *hold
		if err == nil && res != nil {
			h, err = holdResult(r, *res)
		}
		defer h.release()
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeStatusResponse(w, r, p.ID(), res)
	})
}

func (s *sandbox) signal(w http.ResponseWriter, r *http.Request) {
	s.withProcess(w, r, func(p execbox.Process) {
		var req api.SignalRequest
		if err := readJSON(r, s.opts.MaxJSONBody, &req, true); err != nil {
			s.fail(w, r, err)
			return
		}
		if req.Signal == 0 {
			s.fail(w, r, execbox.Invalid("signal", "is required (a signal number or name)"))
			return
		}
		if err := p.Signal(r.Context(), execbox.Signal(req.Signal)); err != nil {
			s.fail(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// stdinChunk is the most a stdin request hands to WriteStdin at once.
const stdinChunk = 64 << 10

func (s *sandbox) stdin(w http.ResponseWriter, r *http.Request) {
	s.withProcess(w, r, func(p execbox.Process) {
		n, err := copyBody(r, p.WriteStdin)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, api.StdinResponse{Written: n})
	})
}

func (s *sandbox) closeStdin(w http.ResponseWriter, r *http.Request) {
	s.withProcess(w, r, func(p execbox.Process) {
		if err := p.CloseStdin(r.Context()); err != nil {
			s.fail(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// Exec cancellation by client-chosen ID.

// validID reports whether id is 1 to 64 of A-Z a-z 0-9 . _ -: an exec,
// run or process ID. (Not a regexp: compiling one at package init costs
// every agent start a third of a millisecond.)
func validID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for _, c := range []byte(id) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// addExec registers cancel under key (an exec ID, or a session's run,
// see runKey); a cancel that came first fires it at once. It returns
// false, registering nothing, if key is already running.
func (s *sandbox) addExec(key string, cancel context.CancelCauseFunc) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.execs[key]; dup {
		return false
	}
	s.execs[key] = cancel
	if _, ok := s.canceled[key]; ok {
		delete(s.canceled, key)
		cancel(errCanceledByClient)
	}
	return true
}

func (s *sandbox) removeExec(key string) {
	s.mu.Lock()
	delete(s.execs, key)
	s.mu.Unlock()
}

var errCanceledByClient = errors.New("canceled by the client")

func (s *sandbox) cancelExec(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("exec")
	if !validID(id) {
		s.fail(w, r, execbox.Invalid("exec", "%q is not an exec ID (1-64 of A-Z a-z 0-9 . _ -)", id))
		return
	}
	s.cancel(id)
	w.WriteHeader(http.StatusNoContent)
}

// cancel cancels the call registered under key, or, if it has not
// arrived yet, remembers the cancel for it.
func (s *sandbox) cancel(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cancel, ok := s.execs[key]; ok {
		cancel(errCanceledByClient)
		return
	}
	now := time.Now()
	if s.canceled == nil {
		s.canceled = make(map[string]time.Time)
	}
	for k, t := range s.canceled {
		if now.Sub(t) > cancelMemory || len(s.canceled) >= maxCanceled {
			delete(s.canceled, k)
		}
	}
	s.canceled[key] = now
}
