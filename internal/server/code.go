package server

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/code"
)

// runCode runs a program with package code: POST code. The body is the
// api.CodeRequest as JSON, or multipart as for exec (the request, then
// the program's stdin streamed in a part named "stdin"). The response,
// when the run has ended, is the api.CodeResponse, encoded as exec's.
//
// A run takes several commands (probes, compile, run): it counts as one
// running process of the sandbox, and every phase is bounded by the
// server's maximums (checkCode).
func (s *sandbox) runCode(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	req, in, err := s.codeRequest(w, r, cancel)
	defer in.drain(w)
	if err == nil {
		err = s.opts.Max.checkCode(&req)
	}
	if err == nil && s.opts.Policy != nil {
		err = s.allowCode(r, &req)
	}
	var h *hold
	if err == nil {
		// A build's output and the run's.
		h, err = reserve(r, "a code run's result", "output_limit", 2*resultSize(req.OutputLimit))
	}
	defer h.release()
	if err == nil {
		err = s.acquire()
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer s.release()
	res, err := s.codeRunner().Run(ctx, req)
	switch {
	case err != nil && isContextErr(err) && res.Reason != "":
		writeCodeResponse(w, r, res, api.NewError(err))
	case err != nil:
		s.fail(w, r, err)
	default:
		writeCodeResponse(w, r, res, nil)
	}
}

// codeRequest decodes a code request, JSON or multipart (see
// readStreamed).
func (s *sandbox) codeRequest(w http.ResponseWriter, r *http.Request, cancel context.CancelCauseFunc) (code.Request, *streamReader, error) {
	var wire api.CodeRequest
	in, err := s.readStreamed(w, r, cancel, &wire)
	if err != nil {
		return code.Request{}, in, err
	}
	// Every problem at once: the wire's (durations, modes) and the
	// request's.
	req, err := wire.CodeRequest()
	err = errors.Join(err, req.Validate())
	if err != nil {
		return req, in, err
	}
	if in != nil {
		if req.Stdin != nil {
			return req, in, execbox.Invalid("stdin", "given twice: in the request and as a part")
		}
		req.Stdin = in
	}
	return req, in, nil
}

// codeRunner is the Runner of the sandbox: code.Run's shared one when the
// server sets no maximum limits, else one of its own whose defaults are
// within them (a language's defaults, 512 MiB of memory say, may be over
// the server's maximum, and code.Run sends them with each phase), made
// once.
func (s *sandbox) codeRunner() interface {
	Run(context.Context, code.Request) (code.Result, error)
} {
	max := s.opts.Max.Limits
	if max == (execbox.Limits{}) {
		return codeRunFunc(func(ctx context.Context, req code.Request) (code.Result, error) {
			return code.Run(ctx, s.sb, req)
		})
	}
	s.coder.once.Do(func() {
		defs := make(map[code.Language]code.Defaults)
		for _, l := range code.Languages() {
			d := code.DefaultsFor(l)
			d.Limits = withinMax(d.Limits, max)
			d.CompileLimits = withinMax(d.CompileLimits, max)
			defs[l] = d
		}
		s.coder.r = code.NewRunner(s.sb, code.Options{Defaults: defs})
	})
	return s.coder.r
}

// lazyRunner is a sandbox's own code.Runner, made on first use.
type lazyRunner struct {
	once sync.Once
	r    *code.Runner
}

type codeRunFunc func(context.Context, code.Request) (code.Result, error)

func (f codeRunFunc) Run(ctx context.Context, req code.Request) (code.Result, error) {
	return f(ctx, req)
}

// withinMax lowers each field of l over its maximum to the maximum.
func withinMax(l, max execbox.Limits) execbox.Limits {
	lower := func(v *int64, m int64) {
		if m > 0 && *v > m {
			*v = m
		}
	}
	if max.CPUTime > 0 && l.CPUTime > max.CPUTime {
		l.CPUTime = max.CPUTime
	}
	lower(&l.FileSize, max.FileSize)
	lower(&l.OpenFiles, max.OpenFiles)
	lower(&l.AddressSpace, max.AddressSpace)
	lower(&l.Memory, max.Memory)
	lower(&l.PIDs, max.PIDs)
	if max.CPUs > 0 && l.CPUs > max.CPUs {
		l.CPUs = max.CPUs
	}
	return l
}

// checkCode bounds a code request as checkExec bounds an exec: its
// limits, the timeouts of both phases and the output limit. A negative
// limit (no default) leaves the sandbox's own limit, already bounded.
func (m *Maximums) checkCode(req *code.Request) error {
	errs := []error{m.checkLimits("limits.", req.Limits)}
	bound(&errs, "timeout_ms", &req.Timeout, code.DefaultTimeout, m.Timeout)
	bound(&errs, "compile_timeout_ms", &req.CompileTimeout, code.DefaultCompileTimeout, m.Timeout)
	bound(&errs, "output_limit", &req.OutputLimit, execbox.DefaultOutputLimit, m.OutputLimit)
	return errors.Join(errs...)
}

// writeCodeResponse answers with a run's result, its outputs and the
// compile step's encoded as exec's (writeResult): in the JSON, or, for
// a client accepting multipart, as raw parts named "stdout", "stderr",
// "compile.stdout" and "compile.stderr".
func writeCodeResponse(w http.ResponseWriter, r *http.Request, res code.Result, e *api.Error) {
	data := res
	data.Result = stripped(res.Result)
	var compile execbox.Result
	if res.Compile != nil {
		compile = *res.Compile
		c := stripped(compile)
		data.Compile = &c
	}
	resp := api.CodeResponse{Result: api.NewCodeResult(data), Error: e}
	outs := outputs(&resp.Result.Stdout, &resp.Result.Stderr, res.Stdout, res.Stderr)
	if c := resp.Result.Compile; c != nil {
		outs = append(outs, streamed{&c.Stdout, compile.Stdout.Data, "compile.stdout"}, streamed{&c.Stderr, compile.Stderr.Data, "compile.stderr"})
	}
	writeResult(w, r, http.StatusOK, &resp, outs)
}
