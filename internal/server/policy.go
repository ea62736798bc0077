package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
)

// Policy decides whether a Server does an action: create a sandbox, run
// something in one, or change its files (api.ActionKind lists them). It
// is asked before the action, which happens only if the decision allows
// it. A policy can allow or deny, never change the action. An error
// means the policy could not decide: the action is refused (fail
// closed) with "unavailable". Check must be safe for concurrent use; it
// must not keep a.
type Policy interface {
	Check(ctx context.Context, a *api.PolicyAction) (api.PolicyDecision, error)
}

// PolicyFunc is a function as a Policy.
type PolicyFunc func(ctx context.Context, a *api.PolicyAction) (api.PolicyDecision, error)

// Check calls f.
func (f PolicyFunc) Check(ctx context.Context, a *api.PolicyAction) (api.PolicyDecision, error) {
	return f(ctx, a)
}

// PolicyDeniedError is the error of an action the policy denied. It
// matches execbox.ErrPermission (permission_denied on the wire).
type PolicyDeniedError struct {
	Kind   api.ActionKind
	Reason string
}

func (e *PolicyDeniedError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("%s denied by policy (no reason given)", e.Kind)
	}
	return fmt.Sprintf("%s denied by policy: %s", e.Kind, e.Reason)
}

// Unwrap returns execbox.ErrPermission.
func (e *PolicyDeniedError) Unwrap() error { return execbox.ErrPermission }

// PolicyUnavailableError is the error of an action refused because the
// policy could not decide (a webhook unreachable, slow, or answering
// nonsense). It matches execbox.ErrUnavailable (unavailable on the wire,
// which clients may retry), whatever Err is: a hook's timeout is not the
// caller's deadline.
type PolicyUnavailableError struct {
	Kind api.ActionKind
	Err  error
}

func (e *PolicyUnavailableError) Error() string {
	return fmt.Sprintf("%s refused: the policy could not decide: %s", e.Kind, publicProblem(e.Err))
}

// Unwrap returns execbox.ErrUnavailable only: Err stays out of
// errors.Is, and out of the message for the caller beyond its problem.
func (e *PolicyUnavailableError) Unwrap() error { return execbox.ErrUnavailable }

// publicProblem is what the caller learns of a policy's failure: a
// webhook's problem (timed out, unreachable, ...) without addresses,
// which stay in the server's log.
func publicProblem(err error) string {
	var he *HookError
	if errors.As(err, &he) {
		return "the policy hook " + he.Problem
	}
	return "policy error"
}

// maxReason bounds a denial's reason as the caller sees it.
const maxReason = 1024

// checkPolicy asks opts.Policy (which must be set) about a, filling the
// fields every action has, and returns nil if the action may go on. A
// denial is logged at info, a failure to decide at warn.
func checkPolicy(r *http.Request, opts *Options, log *slog.Logger, a *api.PolicyAction) error {
	a.Version = api.PolicyVersion
	a.Time = time.Now().UTC()
	a.RequestID = api.RequestID(r.Context())
	a.Tenant = policyTenant(r)
	d, err := opts.Policy.Check(r.Context(), a)
	if err != nil {
		if cerr := r.Context().Err(); cerr != nil {
			return cerr // the caller went away: not the policy's failure
		}
		log.Warn("policy could not decide: refused", "kind", a.Kind, "request_id", a.RequestID, "error", err)
		return &PolicyUnavailableError{Kind: a.Kind, Err: err}
	}
	if !d.Allow {
		reason, _ := clip(d.Reason, maxReason)
		log.Info("policy denied", "kind", a.Kind, "request_id", a.RequestID, "reason", reason)
		return &PolicyDeniedError{Kind: a.Kind, Reason: reason}
	}
	return nil
}

// policyTenant is the tenant of r, for PolicyAction.Tenant: the name of
// its API key (for a sandbox token, of the key owning the sandbox), or
// "" on a server without keys.
func policyTenant(r *http.Request) string { return principal(r).Tenant }
