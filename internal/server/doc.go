// Package server implements the execbox protocol (package api, whose
// doc.go is the specification) over net/http: one set of per-sandbox
// handlers over any execbox.Sandbox, mounted at /v1/ by an agent serving
// one sandbox inside a boundary (NewSandboxHandler, ServeSandbox; the
// agent itself is internal/agent.Serve), and under /v1/sandboxes/{id}/ by execbox serve, whose Server
// also creates, lists and deletes sandboxes from its runtimes.
//
// Request bodies are read through limits (Options.MaxJSONBody,
// Options.MaxFileBody); tar uploads, stdin and every download are
// streamed. JSON bodies are decoded strictly: every unknown field is an
// invalid_argument naming it, so a request using a field this server does
// not know fails instead of being half-honoured. A bearer token
// (Options.Token) guards everything but GET /v1/health and GET
// /v1/version; it is compared in constant time. Requests are logged at
// debug level with their sandbox and process; errors the server cannot
// classify at error level, once. Options.Observer receives request and
// exec measurements for metrics.
//
// A Server with Options.Policy asks it before each create, exec, process
// start, session open and run, and file change (policy.go; the action
// schema is api.PolicyAction), and refuses what it denies or cannot
// decide on; agents never ask. Without a policy, a nil check is all.
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
