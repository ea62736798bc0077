// Package server implements the execbox protocol (package api, whose
// doc.go is the specification, and api/openapi.yaml its description for
// tools) over net/http: one set of per-sandbox handlers over any
// execbox.Sandbox, mounted at /v1/ by an agent serving one sandbox inside
// a boundary (NewSandboxHandler, ServeSandbox; the agent itself is
// internal/agent.Serve), and under /v1/sandboxes/{id}/ by execbox serve,
// whose Server also creates, lists and deletes sandboxes from its
// runtimes.
//
// Request bodies are read through limits (Options.MaxJSONBody,
// Options.MaxFileBody); tar uploads, stdin and every download are
// streamed. JSON bodies are decoded strictly: every unknown field is an
// invalid_argument naming it, so a request using a field this server does
// not know fails instead of being half-honoured. Every request gets an
// X-Request-ID (the client's when valid), echoed, logged, and sent on to
// the agent; a Server logs each request at info (metrics_log.go), an
// agent at debug. Options.Observer receives request, exec, create, close
// and pool measurements, which internal/metrics turns into Prometheus
// metrics.
//
// A Server is built for many clients at once (docs/server.md):
//   - tenant.go: API keys (Options.Token, Options.Keys), each owning the
//     sandboxes it creates, which other keys cannot tell from unknown
//     IDs; admin keys; per-key maximums; sandbox tokens reaching one
//     sandbox. GET /v1/health, /v1/version and /v1/openapi.yaml are
//     public.
//   - lifetime*.go: each sandbox's lifetime and idle timeout
//     (Options.Lifetimes), the reaper, the last state of ended sandboxes,
//     and sandboxes whose boundary is lost marked failed.
//   - pool*.go: warm pools of sandboxes made ahead of demand
//     (Options.Pools, /v1/pools), taken by a create naming one.
//   - policy*.go: Options.Policy, asked before each create, exec,
//     process start, session open and run, file change, code run and git
//     operation (the action schema is api.PolicyAction); agents never ask.
//     Without a policy, a nil check is all.
//   - restart.go: the records of held sandboxes (Options.StateDir), so
//     that after a crash their IDs answer closed, and Sweep, which
//     removes what sandboxes of dead processes left.
//   - code.go, git.go: package code's runs and package git's operations
//     as one request each.
//
// Processes started through the API are found again by ID after a client
// reconnects: through the sandbox's own table when it has one
// (internal/agent.Sandbox.Process), else through the handler's, which
// keeps the last 64 ended processes as the agent does. Sessions are the
// sandbox's execbox.SessionOpener's, looked up by ID on every request; a
// sandbox without one answers the session endpoints with unsupported.
// Execs and session runs named by the client can be cancelled by that
// name, the cancel remembered for a while if it comes first.
package server
