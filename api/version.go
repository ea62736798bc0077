package api

// Protocol is the major version of the protocol, the first segment of
// every path (/v1/...). A change that is not an addition gets a new
// major, served next to the old one.
const Protocol = "v1"

// Revision counts the additions made to Protocol (endpoints, optional
// request fields, response fields, error codes, event kinds). A client
// that needs an addition checks Version.Revision first.
//
//   - 1: the first protocol.
//   - 2: sessions (B sessions...), and the sandbox's capabilities in
//     SandboxInfo.
//   - 3: results (of exec, processes, sessions) as multipart/mixed when
//     the client accepts it and the output is large: the JSON in a part
//     named "response", the outputs' bytes raw in parts "stdout" and
//     "stderr".
//   - 4: the server's image store: GET /v1/images, POST
//     /v1/images/pull, /v1/images/remove and /v1/images/prune.
//   - 5: POST /v1/sandboxes/{id}/commit.
//   - 6: the server for fleets. Tenants: SandboxInfo.owner, and sandbox
//     tokens (POST and GET /v1/sandboxes/{id}/tokens, DELETE
//     /v1/sandboxes/{id}/tokens/{token}). The policy hook: the routes it
//     is asked about may answer permission_denied (denied) and
//     unavailable (it could not decide). GET /metrics. The X-Request-ID
//     header on every request and response. Lifetimes: Spec timeout_ms
//     and idle_timeout_ms; SandboxInfo state, expires_at,
//     idle_timeout_ms, last_active_at, ended_at, end_reason and
//     end_detail; POST /v1/sandboxes/{id}/timeout; GET of an ended
//     sandbox answering its last state. GET /v1/sandboxes?label=K=V.
//     Warm pools: GET and POST /v1/pools, GET and DELETE
//     /v1/pools/{name}, Spec.pool and SandboxInfo.pool. Code runs: POST
//     /v1/sandboxes/{id}/code. Git: POST /v1/sandboxes/{id}/git/{op}.
//     Result.shell ("bash" or "sh"). GET /v1/openapi.yaml.
//   - 7: every byte of a stream, or a loud failure. Output.held_open;
//     ExecRequest.flow_control (events that slow the command rather
//     than drop output); the event kind "dropped" and Event.dropped and
//     offset. The policy hook sees stdin_size -1 for a start whose
//     stdin stays open and for a PTY session's open; a 429 carries
//     Retry-After; a call to a sandbox whose agent died answers closed.
const Revision = 7

// ProtocolHeader is sent on every response (and by clients on every
// request) with the value Protocol.
const ProtocolHeader = "Execbox-Protocol"

// ErrorTrailer is the HTTP trailer that carries an *Error, as JSON, when
// a streamed response (tar, snapshot, events) fails after its status line
// was sent. It is absent or empty when the stream is complete.
const ErrorTrailer = "Execbox-Error"

// Content types.
const (
	ContentJSON   = "application/json"
	ContentNDJSON = "application/x-ndjson"
	ContentSSE    = "text/event-stream"
	ContentBytes  = "application/octet-stream"
	ContentTar    = "application/x-tar"
	// ContentMultipart is a request streaming its stdin, and (revision 3)
	// a result whose outputs come as raw parts.
	ContentMultipart = "multipart/mixed"
)

// Version is the body of GET /v1/version.
type Version struct {
	// Protocol is "v1".
	Protocol string `json:"protocol"`
	// Revision is the Revision the server implements.
	Revision int `json:"revision"`
	// Server names the implementation, e.g. "execbox dev" or
	// "execbox-agent v0.3.0".
	Server string `json:"server,omitempty"`
	// Role is "server" (execbox serve: many sandboxes under
	// /v1/sandboxes/{id}/) or "agent" (one sandbox, its endpoints at /v1/).
	Role string `json:"role"`
}

// Roles of Version.Role.
const (
	RoleServer = "server"
	RoleAgent  = "agent"
)
