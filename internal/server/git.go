package server

import (
	"errors"
	"net/http"
	"strings"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/git"
)

// runGit runs one git operation with package git: POST git/{op}, the
// body the operation's api.Git*Request. The response is an
// api.GitReply: the operation's answer, or the failure of a git command
// that ran (an *git.Error, status 200, as an exec's exit code is data).
//
// The credentials' token is used for the operation only: git gets it
// through its environment-only configuration (see package git), it is
// redacted from everything returned, and it is never logged (this
// handler logs no body, and errors are redacted before they are).
func (s *sandbox) runGit(w http.ResponseWriter, r *http.Request) {
	op := r.PathValue("op")
	body := api.NewGitRequestFor(op)
	if body == nil {
		s.fail(w, r, &execbox.FieldError{Field: "path", Kind: execbox.ErrUnsupported,
			Problem: "no git operation " + op + " (known: " + strings.Join(git.Ops, ", ") + ")"})
		return
	}
	err := readJSON(r, s.opts.MaxJSONBody, body, false)
	var call git.Call
	if err == nil {
		call, err = api.GitCall(op, body)
	}
	if err == nil {
		err = s.opts.Max.checkGit(&call)
	}
	if err == nil && s.opts.Policy != nil {
		err = s.allowGit(r, op, body)
	}
	var h *hold
	if err == nil {
		// Its answer holds at most a git command's output (a diff's
		// patch, a status): reserved like an exec's result.
		h, err = reserve(r, "a git operation's answer", "output_limit", resultSize(call.OutputLimit))
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
	rep, err := git.Do(r.Context(), s.sb, call)
	var reply api.GitReply
	if ge, ok := err.(*git.Error); ok {
		reply, err = api.GitReply{Error: api.NewGitFailure(ge)}, nil
	} else if err == nil {
		reply = api.NewGitReply(rep)
	}
	if err == nil {
		err = writeJSONHeld(w, r, h, "", "", http.StatusOK, reply)
	}
	if err != nil {
		s.fail(w, r, err)
	}
}

// checkGit bounds a git operation as checkExec bounds an exec: the
// timeout of each git command and its output limit.
func (m *Maximums) checkGit(call *git.Call) error {
	var errs []error
	bound(&errs, "timeout_ms", &call.Timeout, execbox.DefaultTimeout, m.Timeout)
	bound(&errs, "output_limit", &call.OutputLimit, execbox.DefaultOutputLimit, m.OutputLimit)
	return errors.Join(errs...)
}
