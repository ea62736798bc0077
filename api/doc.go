// Package api is the execbox protocol: its wire types, error codes and
// version, and, in this comment, its specification.
//
// One protocol serves two roles. An agent runs inside an isolation
// boundary (namespaces, a container, a pod) and serves the one sandbox
// that boundary is, its endpoints at /v1/; isolated runtimes talk to it
// over a unix socket. A server (execbox serve) holds many sandboxes, made
// by its runtimes, and serves each one's endpoints under
// /v1/sandboxes/{id}/; the remote runtime talks to it. The per-sandbox
// endpoints are the same in both, served by the same handlers
// (internal/server) and used by the same client (package client); below,
// B stands for their base: /v1/ on an agent, /v1/sandboxes/{id}/ on a
// server.
//
// The protocol follows KEP-539.2 of kubernetes-sigs/agent-sandbox
// ("runtime standardization") where that is sound; see "Relation to
// KEP-539.2" at the end.
//
// This comment is the protocol's prose. Its machine-readable form is the
// OpenAPI 3.1 document api/openapi.yaml (OpenAPI in Go), every route,
// body and error, which servers and agents serve at GET /v1/openapi.yaml
// and the server's tests hold every real request and response to.
// Its info.version is the protocol's major version and revision ("1.6":
// v1, revision 6, which added the document and its route).
//
// # Transport and versioning
//
// HTTP/1.1 or HTTP/2, over TCP or a unix socket. Bodies are JSON
// (application/json) unless an endpoint says otherwise; file content,
// stdin and tar streams are raw bytes, never base64.
//
// The major version is the first path segment: /v1/. Within v1 the
// protocol only grows: endpoints, optional request fields (whose absence
// keeps the old behaviour), response fields, error codes, event kinds and
// file types are added, never removed, renamed or changed in meaning. A
// change that is not an addition gets /v2/, served next to /v1/ for as
// long as clients need it. Every response carries the header
// "Execbox-Protocol: v1"; clients send it too. GET /v1/version tells the
// revision (a count of additions to v1, Revision): a client that needs a
// later addition checks it first. Revision 2 added sessions and the
// sandbox's capabilities in SandboxInfo; revision 6 the server for
// fleets: tenants and sandbox tokens, the policy hook, request IDs,
// metrics, lifetimes and label filters, warm pools, code runs and git
// operations, Result.shell and the OpenAPI document (api.Revision lists
// every revision's additions).
//
// Servers decode requests strictly: an unknown field, anywhere, is an
// invalid_argument naming it ("limits.memory_mb"), with every such field
// reported at once. So a client using a field this server does not know
// learns it, rather than having it silently ignored (a limit not
// enforced). Clients, in turn, ignore response fields and event kinds they
// do not know.
//
// # Conventions
//
// Durations are JSON numbers of milliseconds, fractions allowed, in
// fields whose names end in "_ms" ("timeout_ms": 1500, "duration_ms":
// 0.412). Sizes are bytes. Times are RFC 3339 strings with nanoseconds.
// Signals are Linux signal numbers. Modes are octal strings of four
// digits ("0644", "4755": permission bits plus setuid 4000, setgid 2000,
// sticky 1000); three digits are accepted.
//
// Bytes that may not be UTF-8 (command output, event data, stdin and
// content given in JSON) travel as a Payload: exactly one of "text" (a
// JSON string, when the bytes are valid UTF-8 and no longer escaped than
// in base64; exact, with no omission marker or replacement character)
// and "data" (base64 of the raw bytes, otherwise: NUL bytes would be six
// each in a string); neither means no bytes. Readers take data when
// present, else text, whichever a writer chose.
//
// Every other JSON string (argv, shell, env names and values, dir, asset
// and session paths, labels) must be valid UTF-8, since JSON cannot carry
// other bytes unchanged: a request body that is not UTF-8 is refused with
// invalid_argument naming the field that holds the first invalid byte
// ("command[1]", "env.NAME"), never decoded with U+FFFD in its place. The
// Go client refuses such a request before sending it, the same way. Bytes
// that are not UTF-8 go as a Payload (stdin, content) or in a query
// parameter (file paths, which are percent-encoded bytes). A file's names
// in a response (list, stat) that are not UTF-8 come in "raw" as well:
// {"path", "name", "target"}, each base64 of the exact bytes, beside the
// readable forms with U+FFFD.
//
// File paths are query parameters (?path=P), never URL path segments: a
// URL path is normalised by routers and proxies ("a/../b", "//etc"),
// which would change what a ".." or absolute path means before the
// workspace can refuse it. P is relative to the workspace, or absolute
// inside it; a path that leaves the workspace, by ".." or through a
// symlink, is permission_denied.
//
// Authentication, when the server has a token: "Authorization: Bearer
// TOKEN" on every request but GET /v1/health, GET /v1/version and GET
// /v1/openapi.yaml; a
// missing or wrong token is unauthenticated (401). execbox serve has a
// token on every TCP address, loopback included (it generates and
// prints one when none is configured); on a unix socket, mode 0600, the
// token is optional. Tokens are compared in constant time.
//
// Tenants. A server may have API keys, each with a name: the tenant.
// A key owns the sandboxes it creates ("owner" in SandboxInfo): to any
// other key, a sandbox it does not own is not_found, on every route
// (info, exec, files, processes, sessions, tokens, delete), with
// exactly the body an unknown ID gets, and its deleted sandboxes too,
// so no ID leaks across tenants; GET /v1/sandboxes lists the key's own.
// Admin keys, and the server's single token of before (named "admin"),
// see and manage every sandbox. A key may have maximums of its own
// (live sandboxes; memory, pids, cpus, CPU time), within the server's:
// over a count is resource_exhausted, over a limit invalid_argument
// naming the field, and a request that sets none of a bounded limit
// gets the key's maximum, as for the server's (see Maximums). The image
// store is shared by every tenant, so /v1/images and commit need an
// admin key (permission_denied otherwise); GET /v1/runtimes is open to
// every key. The server keeps each key's SHA-256 alone and compares a
// presented token's SHA-256 with every key's in constant time.
// (Revision 6, as are sandbox tokens.)
//
// Sandbox tokens hand one sandbox to a less trusted client (an agent's
// session, as OpenHands gives each session its own key):
//
//	POST   /v1/sandboxes/{id}/tokens          {"ttl_ms": 600000} -> 201 SandboxToken
//	GET    /v1/sandboxes/{id}/tokens          -> 200 {"tokens": [SandboxToken]} (no secrets)
//	DELETE /v1/sandboxes/{id}/tokens/{token}  -> 204 (revoked at once)
//
// SandboxToken is {"id", "token", "sandbox", "created_at",
// "expires_at"}; "token", the bearer token (256 random bits, hex), is
// in the create answer alone; "id" names it for revoking. The owner of
// the sandbox or an admin may make, list and revoke them, up to 64 live
// ones per sandbox (resource_exhausted). A sandbox token reaches that
// sandbox's own endpoints (GET /v1/sandboxes/{id} and everything under
// B, below) and nothing else: another sandbox is not_found, any other
// route (create, list, DELETE of the sandbox, tokens, images, runtimes,
// commit) permission_denied. It cannot delete its sandbox: the owner
// decides when the sandbox ends, and a client that needs to stop work
// kills its processes. It ends, unauthenticated from then on, at
// ttl_ms (absent or 0: none), when revoked, or when its sandbox ends.
//
// Requests from browsers. A server may list the names it answers to: a
// request whose Host header (port aside) is not one of them is
// permission_denied (403), so a web page whose name an attacker
// resolves to the server's address (DNS rebinding) reaches nothing.
// execbox serve allows localhost, 127.0.0.1, ::1, the listen address and
// the configured server.hosts; on a unix socket any Host. A POST or PUT
// (and a DELETE with a body) must carry one of the media types
// application/json, application/octet-stream, application/x-tar or
// multipart/mixed, even without a body; any other, or none, is
// invalid_argument naming the field "Content-Type" with status 415. None
// of these is a type an HTML form or a CORS "simple request" can send,
// so a cross-site page cannot make a browser call the API.
//
// Request IDs. A client may send "X-Request-ID: ID", 1 to 128 bytes
// of printable ASCII (space to tilde). Every response carries
// X-Request-ID: the client's when valid, else one the server made (16
// hex digits; an invalid ID is replaced, never a reason to refuse the
// request). A server logs each request under its ID and sends it on its
// own calls into a sandbox's agent, which logs it too: one ID finds a
// call in the logs of both. (Revision 6.)
//
// Metrics. execbox serve answers GET /metrics, outside /v1/ where
// Prometheus looks, in the Prometheus text format (its protobuf format
// when Accept asks for it), behind the token like every route and for
// admin keys only (the counts are every tenant's). No label carries an
// ID: requests are counted by route pattern
// ("POST /v1/sandboxes/{sandbox}/exec") and status. (Revision 6.)
//
// Maximums. A server may bound what a request asks for. A size or
// duration over its maximum (a limit in spec.limits or limits, timeout_ms,
// output_limit, event_window, a file read's limit) is invalid_argument
// naming the field; a request that sets none of a bounded limit gets the
// maximum. A count at its maximum (live sandboxes, running processes and
// execs of a sandbox, open sessions of a sandbox) is resource_exhausted
// (429), and a tar upload larger than its maximum resource_exhausted
// naming "body" (413). So is a request whose result (twice its
// output_limit), file read or body does not fit in what the server may
// hold for its callers, or for the caller's tenant (server.
// max_result_memory; docs/server.md). A 429 carries Retry-After (in
// seconds): it was refused before anything was done, and may be sent
// again, POST included, after that wait. A server ends the connection
// of a caller reading a result slower than its server.min_read_rate.
// Every problem of a request is reported at once, whichever check
// found it (decoding, the request's own rules, the maximums), each
// named by its wire field, in fields and in the message.
// execbox serve's defaults are in its server.* configuration.
//
// # Errors
//
// An error response has the status of its code and the body
//
//	{"error": {
//	  "code": "invalid_argument",
//	  "message": "command: is required (or shell)\ntimeout_ms: must not be negative",
//	  "fields": [
//	    {"field": "command", "problem": "is required (or shell)", "code": "invalid_argument"},
//	    {"field": "timeout_ms", "problem": "must not be negative", "code": "invalid_argument"}
//	  ]
//	}}
//
// code is stable; message is for people. fields lists every request
// field at fault, by its wire name (dotted and indexed:
// "setup[1].limits.cpu_time_ms"; fields of a create request are named
// relative to the spec), each with its own code: a limit the runtime
// cannot enforce is unsupported, a path leaving the workspace
// permission_denied, a missing program not_found. A failed setup command
// adds "setup": {"index", "command", "result"}. Clients decide by code,
// never by status or message. The codes, append-only:
//
//	code               status  meaning (Go error in package execbox)
//	invalid_argument   400     malformed request; retrying unchanged fails again (ErrInvalidArgument)
//	unauthenticated    401     missing or wrong bearer token (ErrPermission)
//	permission_denied  403     not allowed, e.g. a path leaving the workspace, or by the server's policy (ErrPermission)
//	not_found          404     no such sandbox, process, file, directory or program (ErrNotFound)
//	closed             410     the sandbox, process or stdin was closed (ErrClosed)
//	resource_exhausted 429     processes, files, disk or a size limit ran out; 413 for a
//	                           request body over the server's limit (ErrResourceExhausted)
//	canceled           499     cancelled (context.Canceled)
//	internal           500     a failure the server could not classify
//	unsupported        501     the runtime cannot honour a field, or no such endpoint (ErrUnsupported)
//	unavailable        503     the runtime cannot work now; shutting down (ErrUnavailable)
//	deadline_exceeded  504     a deadline passed (context.DeadlineExceeded)
//
// A sandbox's ID answers closed, not not_found, for a while after it
// ended (deleted, timed out, idle, failed), saying when and why.
//
// Go clients get these back as errors that answer errors.Is (the code's
// kind, and each field's) and errors.As (*execbox.FieldError under its Go
// field name, "timeout" for "timeout_ms"; *execbox.SetupError) as the
// server's own error did: Error.Err. A server that cannot be reached is
// ErrUnavailable.
//
// # Restarts
//
// A sandbox does not outlive the server that holds it. A server stopped
// with SIGTERM closes its sandboxes; one killed (SIGKILL, a crash, the
// OOM killer) cannot, and the next server started on the same machine
// removes, before it serves, whatever they left (processes, cgroups,
// mounts, containers, temporary workspaces). With a state directory
// (execbox serve: server.state_dir, on by default) the server records
// the IDs it holds, and the next server answers every request for one
// of them with closed, saying it was lost:
//
//	410 {"error": {"code": "closed", "message": "sandbox sb-... was lost: the server that held it
//	     (runtime sandbox, created at ...) stopped without closing it; this server restarted at ..."}}
//
// closed, not unavailable: the sandbox is gone for good and no retry
// brings it back; the client creates a new one (DELETE of a lost ID
// answers closed too, which a client's Close takes for done). The next
// restart forgets those IDs (not_found).
//
// Clients retry what is idempotent on a connection failure, 502 or 503,
// with exponential backoff and full jitter, bounded in tries and time:
// GET and HEAD; PUT of a file's bytes; DELETE of a sandbox or session
// (a repeat answers closed, or not_found for a session, meaning done).
// Never POST (create, exec, start, stdin, signal: a repeat runs twice),
// a streamed upload (its body cannot be sent twice), or DELETE of a file
// (a repeat answers not_found for a success) unless the connection was
// never made. The Go client does so (client.WithRetry, client.Retry).
//
// # Discovery and health (server and agent)
//
//	GET /v1/version   -> 200 Version {"protocol": "v1", "revision": 2, "server": "...", "role": "server"|"agent"}
//	GET /v1/health    -> 200 {"status": "ok"} | 503 {"status": "unavailable", "detail": "..."}
//	GET /v1/openapi.yaml -> 200 the OpenAPI 3.1 document of the protocol (application/yaml)
//
// Health is for probes: cheap, unauthenticated, 503 while shutting down.
// An agent's health also describes its sandbox ("sandbox": SandboxInfo)
// and is unavailable once the sandbox is closed.
//
// # Sandboxes (server)
//
//	GET    /v1/runtimes                     -> 200 {"runtimes": [RuntimeInfo]}
//	POST   /v1/sandboxes[?runtime=NAME]     Spec -> 201 SandboxInfo, Location: /v1/sandboxes/{id}
//	GET    /v1/sandboxes[?label=K=V...]     -> 200 {"sandboxes": [SandboxInfo]}, oldest first
//	GET    /v1/sandboxes/{id}               -> 200 SandboxInfo (also of an ended sandbox)
//	DELETE /v1/sandboxes/{id}               -> 204
//	POST   /v1/sandboxes/{id}/timeout       {"timeout_ms": N} -> 200 SandboxInfo
//
// RuntimeInfo is {"name", "default", "available", "detail",
// "capabilities": {"isolation", "rlimits", "memory", "pids", "cpus",
// "user"}}, the runtime's health and what it enforces. A create request
// names one of the server's runtimes, or gets the first (the default). Its
// body is the Spec:
//
//	{"workspace": "/srv/w", "env": {"K": "V"}, "env_policy": "clean"|"inherit"|"allow",
//	 "env_allow": ["NAME"], "limits": Limits, "user": {"uid", "gid", "groups"},
//	 "labels": {"k": "v"}, "timeout_ms": 3600000, "idle_timeout_ms": 1800000,
//	 "assets": [{"path": "p", "content": Payload, "mode": "0644"} | {"path": "p", "source": "/host/path"}],
//	 "setup": [ExecRequest], "pool": "NAME"}
//
// Assets and setup commands are applied before the response; a failing
// setup command fails the create (invalid_argument with "setup") and
// leaves nothing behind. workspace, asset sources and an image that is a
// path (see Images) are paths on the server's machine, refused
// (permission_denied) unless the server allows host paths. A snapshot is restored after creation with PUT B files/tar.
// SandboxInfo is {"id", "runtime", "workspace", "labels", "created_at",
// "owner", "capabilities"}; owner is the name of the key that created
// it (see Tenants; absent without authentication); workspace is the path commands see, and capabilities
// ({"isolation", "rlimits", ...}, as for RuntimeInfo) what the sandbox
// enforces, the same as its runtime (revision 2; GET B info carries them
// too, so an agent's clients learn them without knowing the runtime). DELETE kills everything the sandbox
// started and removes what it made before answering.
//
// Lifetimes. A server ends its sandboxes by itself. timeout_ms is a
// sandbox's lifetime, from its creation; idle_timeout_ms ends it once it
// has been idle that long: no call under /v1/sandboxes/{id}/ (but GET B
// info and GET B health, which only look) nor POST .../timeout, no
// process or exec of it running and no session of it open. A spec
// without them gets the server's defaults; one asking more than the
// server's maximum is invalid_argument naming the field (execbox serve:
// server.sandbox_timeout 1h, server.sandbox_idle_timeout 30m, each at
// most 24h). Ending kills everything the sandbox started and removes
// what it made, as DELETE does. POST /v1/sandboxes/{id}/timeout
// {"timeout_ms": N} (as e2b's set_timeout) makes the lifetime end N ms
// from now, sooner or later than it would have; the maximum bounds the
// whole life from creation, so an extension past it is invalid_argument
// naming timeout_ms (the message says how much is left). A server also
// checks that each sandbox's boundary lives (every 10 s, and at once
// when a call fails unavailable): a sandbox whose agent died is closed
// and marked failed, with the cause, and the call that found it dead,
// like every later one, answers closed (410) saying so. Lifetimes, the timeout endpoint,
// the label filter and these SandboxInfo fields, which a server (not an
// agent) adds, came with revision 6:
//
//	{"state": "running"|"closed"|"failed",
//	 "expires_at": "2026-01-02T16:04:05Z", "idle_timeout_ms": 1800000,
//	 "last_active_at": "...",
//	 "ended_at": "...", "end_reason": "deleted"|"timeout"|"idle"|"failed"|"shutdown",
//	 "end_detail": "its lifetime of 1h0m0s ran out (...)"}
//
// expires_at and idle_timeout_ms are absent when the sandbox has no such
// limit; its idle deadline is last_active_at plus idle_timeout_ms while
// nothing runs in it. An ended sandbox's ID (the server remembers the
// last 4096) answers GET /v1/sandboxes/{id} with its last state, state
// "closed" or "failed" and ended_at, end_reason and end_detail (why, for
// people: the failure's cause); every other call on it is closed (410)
// with a message saying when and why it ended. A call that finds the
// agent dead gets unavailable with the cause; the calls after it,
// closed. ?label=K=V (repeatable; every one must match; the value may
// hold "=") lists the live sandboxes having label K with value V; one
// that is not K=V is invalid_argument naming label.

// # Warm pools (server)
//
//	GET    /v1/pools          -> 200 {"pools": [PoolStatus]}, by name
//	POST   /v1/pools          Pool -> 201 PoolStatus, Location: /v1/pools/{name}
//	GET    /v1/pools/{name}   -> 200 PoolStatus
//	DELETE /v1/pools/{name}   -> 204
//
// A pool keeps sandboxes made ahead of demand from a template, so that a
// create naming it answers without making one. Pool is
//
//	{"name": "py", "runtime": "sandbox", "spec": Spec,
//	 "initial": 4, "min_idle": 2, "max": 16, "fallback": "create"|"fail"}
//
// name is 1 to 64 of A-Z a-z 0-9 . _ -; runtime one of the server's
// (absent: the default); spec the template, a Spec without "pool", with
// the rules of a create (host paths, the server's maximums, limits the
// runtime cannot enforce refused as unsupported). The pool
// makes sandboxes in the background until "initial" are idle, then keeps
// "min_idle" idle, refilling as they are taken; "max" (absent or 0: no
// bound) bounds its sandboxes at once, idle, being made and handed out
// and not yet deleted, fallback ones included. A failed background create
// is logged and retried after an exponential backoff with jitter (0.1 s
// doubling to 30 s). A bad pool is invalid_argument naming each field
// ("min_idle", "spec.limits.pids"; a name in use names "name"), an
// unknown runtime not_found naming "runtime". POST answers at once; the
// pool fills afterwards. DELETE closes the pool's idle sandboxes; those
// taken from it stay their callers'. Pools are also defined in
// execbox.yaml (server.pools, a list of Pool).
//
// PoolStatus is the Pool (runtime and fallback filled in) with its counts:
//
//	{..., "idle": 2, "creating": 0, "handed_out": 5, "hits": 9, "misses": 1,
//	 "failures": 3, "retry_at": "...", "last_error": Error, "last_error_at": "..."}
//
// hits and misses count takes served warm and not; failures the
// background creates failed in a row, the next one at retry_at (both
// absent after a success); last_error (an error object, see Errors) the
// last failure of a background create, kept after later successes.
//
// A create whose Spec names "pool" takes the pool's oldest idle sandbox.
// Its runtime (?runtime=) and every field but env, labels and assets
// must be absent or equal the template (else invalid_argument naming
// the field: "image", "limits", "setup", ...); an unknown pool is
// not_found naming "pool". What varies per caller is bound when the
// sandbox is taken: labels are added over the template's; assets, with
// content only ("source" is invalid_argument), are written into the
// workspace before the response; env becomes a default of every command
// the sandbox runs afterwards (exec, processes, sessions), under each
// request's own env and over the template's Spec env, since a warm
// sandbox's own environment was fixed when it was made. The
// SandboxInfo carries "pool": NAME. With no idle sandbox, fallback
// "create" makes one from the template in the request's time, and
// "fail" answers resource_exhausted naming "pool"; a pool at its max
// answers resource_exhausted too. A taken sandbox is the caller's: it is
// never handed out again, and DELETE destroys it rather than returning it
// to the pool, so nothing one caller did reaches the next. Idle
// sandboxes do not count toward the server's maximum of sandboxes; a
// taken one does, as any create.
//
// # Images (server)
//
//	GET  /v1/images         -> 200 {"images": [Image]}, least recently used first
//	POST /v1/images/pull    {"ref": "python:3.12-slim"} -> 200 Image
//	POST /v1/images/remove  {"ref": "python:3.12-slim"} -> 200 Image (as it was)
//	POST /v1/images/prune   {"max_size": 1073741824} -> 200 {"removed": [Image], "freed": bytes}
//
// (Revision 4.) The server's image store: the OCI images, pulled and
// unpacked on its machine, that a spec's "image" makes sandboxes from
// (package image). Image is {"ref", "id", "digest", "chain_id", "size",
// "last_used_at", "in_use"}, one per reference: ref as resolved
// ("index.docker.io/library/python:3.12-slim"), id and digest
// "sha256:..." of the configuration and the manifest, chain_id the
// unpacked root that images with the same layers share (its size counted
// once), size its bytes, in_use whether a sandbox uses it. execbox serve
// manages its store whatever its runtime (one without images merely
// caches them); a server without a store answers unsupported.
//
// A ref is a registry's, or a path of the server's machine (starting
// with "/", "./" or "../": an OCI layout, "DIR:tag", or a tarball), which
// pull refuses with permission_denied naming "ref" unless the server
// allows host paths. References travel in bodies, not in the URL path,
// for the reason file paths do (see Conventions): they hold "/", and
// paths ".." and "//". Pull resolves ref again even when cached; an
// unknown image is not_found, refused credentials permission_denied, an
// unreachable registry unavailable; a pull cut off leaves nothing.
// remove refuses, with unavailable, an image a sandbox uses; prune
// removes the least recently used images that no sandbox uses until the
// store holds at most max_size bytes (absent or 0: every image not in
// use). A missing or bad ref is invalid_argument naming "ref", a
// negative max_size one naming "max_size"; a ref not in the store is
// not_found, its message naming it.
//
//	POST /v1/sandboxes/{id}/commit {"dest": "registry:5000/env:prepared"} -> 200 {"ref", "id", "digest"}
//
// (Revision 5.) What a sandbox made from an image changed in its root
// (not its workspace) becomes a new image: the image's layers and one
// more, pushed to dest, or written to the OCI layout at dest ("/DIR" or
// "/DIR:tag", a path of the server's machine: permission_denied naming
// "dest" unless the server allows host paths). A sandbox without an
// image, or on a runtime that cannot, is unsupported.
//
// # Policy hook (server)
//
// A server may have a policy (execbox serve: server.policy_url; Go:
// internal/server Options.Policy) that it asks before every action that
// makes a sandbox, runs something in one or changes its files, and that
// allows or denies it; it changes nothing (revision 6). The actions, by
// kind:
//
//	create        POST /v1/sandboxes (its setup commands are in it, not asked one by one)
//	exec          POST B exec
//	start         POST B processes
//	session.open  POST B sessions
//	session.run   POST B sessions/{s}/run
//	file.write    PUT B files
//	file.upload   PUT B files/tar
//	file.mkdir    POST B files/mkdir
//	file.remove   DELETE B files
//	code.run      POST B code
//	git.OP        POST B git/OP, every OP (init, clone, status, diff, log,
//	              add, commit, ...): even the reads run programs the
//	              repository's config names (core.fsmonitor, filters)
//
// The server asks once the request is decoded and valid, just before
// acting. A denial answers permission_denied (403)
// with the policy's reason in the message ("exec denied by policy:
// REASON"), and nothing happens: no sandbox, process, session run or
// file change. A policy that cannot decide refuses the action (fail
// closed) with unavailable (503; retrying later may succeed), whose
// message says only what went wrong ("exec refused: the policy could not
// decide: the policy hook timed out after 5s"); the server logs the
// details. Reads (GET), deletes of sandboxes and sessions, signals and
// kills, a process's stdin and a PTY session's typed input (B
// sessions/{s}/write) are not asked about; the action that makes such
// input possible says so with "stdin_size": -1 (a streamed stdin, a
// start whose stdin stays open, a PTY session), so a policy that must
// see every command denies interpreters whose stdin_size is -1. An agent
// never asks; the server in front of it does.
//
// The webhook: the server POSTs the action as JSON (Content-Type
// application/json, X-Request-ID when the request had one, and
// "Authorization: Bearer TOKEN" when server.policy_token_env names one)
// and takes a 2xx answer {"allow": true|false, "reason": "..."}, other
// members ignored. No answer within server.policy_timeout (default 5s),
// a refused connection, a redirect or another status, more than 64 KiB,
// or a body without a boolean "allow" refuses the action.
//
// The action (PolicyAction, version 1; within it fields and kinds are
// only added, so a hook ignores fields it does not know and should deny
// kinds it does not know):
//
//	{"version": 1, "kind": "exec", "time": "2026-11-26T06:00:00.123456789Z",
//	 "request_id": "req-42", "tenant": "team-a",
//	 "sandbox": {"id": "sb-7322dd8d6c74", "runtime": "sandbox", "labels": {"k": "v"}},
//	 "truncated": false,
//	 "command": {"command": ["python3", "x.py"], "shell": "...", "dir": "src",
//	   "env_names": ["API_KEY"], "env_policy": "clean", "env_allow": ["HOME"],
//	   "user": {"uid", "gid", "groups"}, "limits": Limits, "timeout_ms": 5000,
//	   "stdin_size": 10, "stdin": "some input"}}
//
// By kind, one more member describes the action:
//
//   - exec, start: "command", the process as above. stdin_size is the
//     size of a stdin given in the JSON request (and stdin its
//     beginning, as text), absent for none; -1 when input can come that
//     the hook does not see: a streamed one (multipart), or a start
//     without "stdin", whose stdin stays open for B processes/{p}/stdin.
//     (A start given its stdin cannot be written to afterwards.)
//   - session.open: "session" {"kind": "bash"|"python"|"pty"} and
//     "command", the interpreter (argv empty for the kind's default);
//     for "pty", its stdin_size is -1 (B sessions/{s}/write types into
//     it).
//   - session.run: "session" {"id", "kind", "code", "timeout_ms",
//     "stdin_size", "stdin"}.
//   - create: "create" {"image", "workspace" (a host path, on servers
//     allowing them), "env_names", "env_policy", "env_allow", "limits",
//     "user", "assets": [{"path", "source", "size" (-1 for a source),
//     "mode"}], "setup": [command]}; "sandbox" has the runtime and
//     labels, no id.
//   - file.*: "file" {"path", "size" (a write's content; an upload's
//     body, -1 if not known in advance), "mode", "parents", "recursive",
//     "content" (the beginning of a write's content, as text)}. An upload
//     names the directory its tar stream unpacks in, not the files in it.
//   - code.run: "code" {"language", "source", "files": [{"path",
//     "size", "mode"}], "args", "env_names", "limits", "timeout_ms",
//     "stdin_size", "stdin"}.
//   - git.OP: "git" {"op", "request"}: the operation's body as the
//     client sent it, its credentials without the token (a policy sees
//     where a push goes, credentials.url, never the secret).
//
// Environment variables are sent by name only: values often hold
// secrets that a policy service has no need to see (a policy that must
// rule on them denies the names it does not trust). Text that is not
// UTF-8 (stdin, content) arrives with U+FFFD in its place. The action is
// bounded: argv as a whole, a shell line, code, and the stdin and
// content previews at 16 KiB each (PolicyMaxText, cut at a UTF-8
// boundary), lists and maps at 256 entries (PolicyMaxItems), names at
// 256 bytes and label values at 1 KiB; anything cut sets "truncated",
// which a strict policy denies. "tenant" is the API key's name on a
// server with tenants.
//
// # Per-sandbox endpoints (server and agent)
//
//	GET    B health                          -> 200 | 503 Health with "sandbox"
//	GET    B info                            -> 200 SandboxInfo
//	POST   B exec[?id=EXEC]                  ExecRequest | multipart -> 200 ExecResponse
//	POST   B exec/{exec}/cancel              -> 204
//	POST   B processes                       ExecRequest -> 201 ProcessStatus
//	GET    B processes/{p}                   -> 200 ProcessStatus (poll)
//	GET    B processes/{p}/wait              -> 200 Result (when the process has ended)
//	GET    B processes/{p}/events[?from=N]   -> 200 event stream
//	POST   B processes/{p}/stdin             raw bytes -> 200 {"written": N}
//	POST   B processes/{p}/stdin/close       -> 204
//	POST   B processes/{p}/signal            {"signal": 15 | "SIGTERM"} -> 204
//	POST   B processes/{p}/kill              -> 200 ProcessStatus (once the tree is gone)
//	GET    B files?path=P[&limit=N]          -> 200 raw bytes
//	PUT    B files?path=P[&mode=M][&parents=true]   raw bytes -> 204
//	DELETE B files?path=P[&recursive=true]   -> 204
//	GET    B files/stat?path=P               -> 200 FileInfo
//	GET    B files/list?path=P               -> 200 {"entries": [FileInfo]}, sorted by name
//	POST   B files/mkdir?path=P[&mode=M][&parents=true] -> 204
//	PUT    B files/tar?path=P                tar stream -> 204
//	GET    B files/tar?path=P                -> 200 tar stream
//	GET    B snapshot                        -> 200 tar stream of the workspace
//	POST   B sessions                        SessionOptions -> 201 SessionInfo
//	GET    B sessions                        -> 200 {"sessions": [SessionInfo]}, oldest first
//	GET    B sessions/{s}                    -> 200 SessionInfo
//	DELETE B sessions/{s}                    -> 200 Result (once the interpreter and its processes are gone)
//	POST   B sessions/{s}/run[?id=RUN]       SessionRequest | multipart -> 200 RunResponse
//	POST   B sessions/{s}/run/{run}/cancel   -> 204
//	POST   B sessions/{s}/write              raw bytes -> 200 {"written": N}
//	POST   B sessions/{s}/resize             {"rows": 40, "cols": 120} -> 204
//	GET    B sessions/{s}/events[?from=N]    -> 200 event stream
//	GET    B sessions/{s}/wait               -> 200 Result (when the interpreter has ended)
//	POST   B code                            CodeRequest | multipart -> 200 CodeResponse
//	POST   B git/{op}                        Git{Op}Request -> 200 GitReply
//
// # Exec
//
// ExecRequest is
//
//	{"command": ["argv0", "arg"] | "shell": "line for bash -c (sh -c without bash)",
//	 "stdin": Payload, "dir": "sub/dir", "env": {"K": "V"}, "env_policy": "...", "env_allow": [...],
//	 "timeout_ms": 120000, "grace_period_ms": 2000,
//	 "output_limit": 16777216, "kill_on_output_limit": false,
//	 "limits": {"cpu_time_ms", "file_size", "open_files", "address_space", "memory", "pids", "cpus"},
//	 "user": {"uid", "gid", "groups"}, "event_window": 4194304, "flow_control": false}
//
// with the defaults and meaning of execbox.ExecRequest (a zero or absent
// field is the default; exactly one of command and shell). POST exec runs
// it to completion; the response comes when the command has ended:
//
//	{"result": Result}
//
// A timeout, a signal or a limit is a Result, not an error; an error
// response means the command could not be run (a bad request, a missing
// program, a closed sandbox). Result is
//
//	{"reason": "exited"|"signaled"|"timed_out"|"oom_killed"|"cpu_limit"|"output_limit"|"killed"|"error",
//	 "exit_code": 0, "signal": 0, "detail": "",
//	 "stdout": Output, "stderr": Output,
//	 "duration_ms": 1.25, "user_time_ms": 0.4, "system_time_ms": 0.6, "peak_memory": 2883584,
//	 "shell": "bash"|"sh" (a shell-form command only; revision 6)}
//
// and Output is a Payload plus {"total": bytes written, "omitted": bytes
// dropped from the middle, "omitted_at": offset in the kept bytes,
// "held_open": true (revision 7)}: past output_limit the first and last
// halves are kept. total is exact: the result is made once the output
// pipes are at their end, or, when a process the command left running
// (a background job) still holds one open 200 ms after the command
// exited, with everything the pipe held by then, and "held_open" says
// that bytes written later are in no result.
//
// Large outputs (revision 3). Every response that carries a Result (exec,
// GET processes/{p} and /wait, POST processes/{p}/kill, session runs,
// GET sessions/{s}/wait and DELETE sessions/{s}) may instead come as
// multipart/mixed when the request's Accept lists "multipart/mixed" and
// the outputs' kept bytes are more than 64 KiB: a part named "response"
// (Content-Disposition: form-data; name="response", application/json)
// holds the response whose Outputs have no text or data, then a part named
// "stdout" and one named "stderr" (application/octet-stream, with their
// Content-Length; absent when empty) hold the kept bytes, raw. Neither
// side then escapes, encodes or holds the bytes twice; execbox's client
// asks for it. Every such response, JSON or multipart, carries its
// Content-Length.
//
// Stdin. Small input goes in the request ("stdin": {"text": "..."}). A
// stream goes as multipart/mixed (not form-data: see "Requests from
// browsers"): a part named "request" (Content-Disposition: form-data;
// name="request") holding the
// ExecRequest (application/json), then a part named "stdin" whose bytes
// are the command's standard input, ended by the end of the part. The
// server reads the part as the command reads its input, and may answer
// before the part ends (the command exited without reading it all): a
// client must read the response while it still sends the body (HTTP/2,
// or HTTP/1.1 as Go's client does). The server then reads and discards
// the rest of the body, so that the client can finish sending it and the
// connection serves the next request; a client that would rather not
// send the rest closes the connection (or resets the HTTP/2 stream).
// Without any stdin the command reads end-of-file at once.
//
// Cancellation. A client may name its exec with ?id=EXEC (1 to 64 of
// A-Z a-z 0-9 . _ -, unique among the sandbox's running execs). POST
// exec/{EXEC}/cancel then kills the command's whole process tree, and the
// exec's response carries the partial Result with the reason:
//
//	{"result": {"reason": "killed", ...}, "error": {"code": "canceled", ...}}
//
// A cancel that arrives before its exec is remembered for a minute, so
// the exec is cancelled as soon as it comes. Closing the exec's
// connection also kills the command (the partial Result is then lost):
// at once for a JSON request, and for a multipart one when the server
// next reads stdin (a command that never reads it runs to its timeout).
//
// # Processes
//
// POST processes starts a command (the same ExecRequest; its context ends
// with the request, not the process) and answers at once:
//
//	201 {"id": "p3", "running": true}, Location: B processes/p3
//
// The process runs until it exits, times out or is killed. Its stdin is
// fed by POST processes/{p}/stdin (the body's bytes, in order, as many
// requests as needed; closed when the process has ended) and closed by
// POST processes/{p}/stdin/close, which the command reads as end of file.
// GET processes/{p} polls: {"id", "running": false, "result": Result}
// once it has ended. GET processes/{p}/wait waits (a long poll: the
// client may reconnect). kill sends SIGTERM to the whole tree, SIGKILL
// after the grace period, and answers when nothing is left; killing an
// ended process does nothing. signal sends one signal to the main process.
// A server keeps a sandbox's last 64 ended processes for polling and
// re-reading.
//
// # Event streams
//
// GET processes/{p}/events?from=N streams the process's events from
// sequence number N (0 or 1: from the first), as NDJSON
// (application/x-ndjson), one Event per line:
//
//	{"seq": 1, "time": "2026-01-02T15:04:05.123456789Z", "kind": "stdout", "text": "hello\n"}
//	{"seq": 2, "time": "...", "kind": "stderr", "data": "/w=="}
//	{"seq": 3, "time": "...", "kind": "exit", "result": Result}
//
// Sequence numbers start at 1 and grow by one per event across both
// streams, in the order the output was read. The stream waits for new
// events and ends after the exit event, which is always the last. A
// stream that ends otherwise was broken: reconnect with from set to one
// more than the last seq received, and nothing is lost or repeated.
//
// Events keep event_window bytes of output for re-reading. By default
// (window mode) the oldest events go to make room: a reader that fell
// behind, or asks for an N older than the events kept, first gets one
// event of kind "dropped" (revision 7) whose seq is the last one it
// missed, with "dropped", the bytes of output (both streams) left out,
// and "offset", the bytes of output before the next event:
//
//	{"seq": 41, "time": "...", "kind": "dropped", "dropped": 3145728, "offset": 4194304}
//
// "dropped" is -1 when the server cannot know it (N older than the events
// kept, and not 0 or 1): compare offset with what was received. The exit
// event's "dropped" then totals what this reader missed. A process
// started with "flow_control": true (revision 7) drops nothing: once
// event_window bytes of output wait for a reader, the command's writes
// block until one reads on, as a pipe's writer blocks behind a slow
// reader (nobody reading, the command waits until its timeout). An event
// counts as read once the server has written it to a stream; a reader
// that reconnects after losing events in flight gets them again if the
// window still holds them, else a "dropped" event.
//
// An error ends a stream early with a line of kind "error" and no seq:
// {"kind": "error", "error": Error}, also when a stream the server relays
// (a sandbox's agent's) broke. A stream that ends without its exit event
// or an error line was cut: never take it for complete. Idle streams
// carry a blank line every 15 seconds, which readers skip.
//
// With "Accept: text/event-stream" the same events come as server-sent
// events, so browsers' EventSource can follow a process and reconnect by
// itself: "id: SEQ", "event: KIND" and "data: " followed by the Event as
// JSON, then a blank line; heartbeats are comment lines (":"). Without
// ?from, a reconnect's Last-Event-ID header resumes after that seq.
//
// # Sessions
//
// A session is a long-lived interpreter in the sandbox, with the meaning
// of execbox.Session: a bash whose working directory, variables and
// functions persist from one run to the next, a Python interpreter whose
// variables persist between cells, or a program on a pseudo-terminal. A
// sandbox whose runtime has no sessions answers every sessions endpoint
// with unsupported. POST sessions starts one (the request's context
// bounds only the start, up to the interpreter's first prompt) and
// answers
//
//	201 {"id": "s1", "kind": "bash", "command": ["/usr/bin/bash"], "created_at": "..."},
//	    Location: B sessions/s1
//
// Its body, SessionOptions, is
//
//	{"kind": "bash"|"python"|"pty", "command": ["python3", "-X", "utf8"],
//	 "dir": "sub/dir", "env": {"K": "V"}, "env_policy": "...", "env_allow": [...],
//	 "limits": Limits, "user": {"uid", "gid", "groups"},
//	 "rows": 24, "cols": 80, "event_window": 4194304, "flow_control": false, "grace_period_ms": 2000}
//
// with the defaults and meaning of execbox.SessionOptions: kind is
// required; the environment, limits and user default to the sandbox's, as
// for exec; rows, cols, event_window and flow_control concern a PTY session only.
// SessionInfo, as GET sessions lists it and GET sessions/{s} returns it,
// adds "busy" (a run is in progress or queued) and "exited" (the
// interpreter has ended). A session lives until DELETE sessions/{s},
// until its interpreter exits, or until the sandbox is closed; an exited
// session stays listed, answering closed to all but wait and DELETE,
// until it is deleted. DELETE sends SIGHUP, then SIGTERM to everything
// the session started and SIGKILL after the grace period, and answers
// with the interpreter's Result once nothing is left; then the session's
// ID is not_found.
//
// POST sessions/{s}/run runs one bash command or one Python cell to its
// end, one at a time per session: a run arriving while another is in
// progress waits for it, in order. Its body, SessionRequest, is
//
//	{"code": "cd src && make", "stdin": Payload, "timeout_ms": 120000, "output_limit": 16777216}
//
// and stdin may stream instead, as a multipart body exactly as for exec.
// The response comes when the command has ended:
//
//	{"result": {"reason": "exited"|"timed_out"|"killed", "exit_code": 0,
//	            "stdout": Output, "stderr": Output, "value": "42",
//	            "exception": {"type": "ZeroDivisionError", "message": "...", "traceback": "..."},
//	            "duration_ms": 3.5}}
//
// value is the repr of a Python cell's final expression; exception the
// exception a cell raised, as data (exit_code 1). A timeout interrupts the
// command as Ctrl-C does and is a result (timed_out, exit_code 130 in
// bash); the session and its state live on. When the interpreter itself
// ends during the command (bash's exit, a cell's os._exit, a timed-out
// command that could not be stopped without killing the session), the
// response carries the result with an error of code closed:
// {"result": {...}, "error": {"code": "closed", ...}}.
//
// Cancellation works as for exec. A client may name its run with ?id=RUN
// (1 to 64 of A-Z a-z 0-9 . _ -); POST sessions/{s}/run/{RUN}/cancel then
// interrupts the command as a cancelled context does in process (SIGINT
// to its foreground process group, SIGKILL after the grace period), or
// drops a run still waiting for its turn, and the run's response carries
// the partial result: {"result": {"reason": "killed", ...}, "error":
// {"code": "canceled", ...}} (an error alone for a run that had not
// started). A cancel that arrives before its run is remembered for a
// minute. Closing the run's connection interrupts the command too (the
// partial result is then lost), when the server notices, as for exec.
//
// A PTY session has no runs: POST sessions/{s}/write types the body's
// bytes into the terminal (Ctrl-C is "\u0003"), POST sessions/{s}/resize
// sets its size (the program gets SIGWINCH), and GET sessions/{s}/events
// streams what the terminal prints, as stdout events ending with the exit
// event, exactly as a process's event stream: the same NDJSON or SSE, the
// same sequence numbers, the same resumption from ?from= or
// Last-Event-ID, and event_window bytes kept for re-reading. Calling run
// on a PTY session, or write, resize or events on another kind, is
// unsupported (an event stream then starts with an error line). GET
// sessions/{s}/wait waits for the interpreter to end (a long poll) and
// returns its Result: its exit status and what it printed outside
// commands (for a PTY session, the tail of the terminal's output).
//
// # Code
//
// POST code (revision 6) runs a program with package code (see its documentation):
// the toolchain is probed in the sandbox (and remembered for the
// sandbox's life), the source and files are written to a new run
// directory under .execbox/runs/, compiled if the language is, and run.
// CodeRequest is
//
//	{"language": "python"|"py"|"javascript"|"typescript"|"csharp"|"bash"|"sh"|"go"|"c"|"cpp"|...,
//	 "source": "print(1)", "files": [{"path": "m.py", "text": "..." | "data": "base64", "mode": "0644"}],
//	 "stdin": Payload, "args": ["a"], "env": {"K": "V"},
//	 "limits": {...}, "timeout_ms": 60000, "compile_timeout_ms": 120000,
//	 "compile_flags": ["-O0"], "output_limit": 16777216, "cleanup": false}
//
// with the defaults of code.Request: a zero field is the language's
// default, a negative limit removes that default (the sandbox's own
// limits still apply). Stdin streams as for exec (multipart/mixed, a
// "request" part then a "stdin" part), and is read only in the run
// phase. The response, when the run has ended, is
//
//	{"result": CodeResult}
//
// where CodeResult is the Result of the phase that ended the run, its
// fields at the top level, plus
//
//	{"phase": "compile"|"run", "compile": Result (compiled languages),
//	 "language": "python", "toolchain": "python3", "version": "3.11.2",
//	 "command": ["/usr/bin/python3", "main.py"], "limits": {...},
//	 "dir": ".execbox/runs/20250102-150405-1a2b3c4d"}
//
// A compile error is phase "compile" with the compiler's exit code and
// message, not an error response: as for exec, what the program did is
// data. Error responses are for runs that could not be done: a bad
// request (fields named: "language", "files[0].path", "timeout_ms",
// "compile_timeout_ms", ...), a language with no toolchain in the sandbox
// (not_found, saying what each toolchain lacked), a limit the sandbox
// cannot enforce (unsupported). The server's maximums bound timeout_ms
// and compile_timeout_ms (absent ones become the maximum where the
// language's default is over it), output_limit and limits, and the
// languages' default limits are lowered to the maximum limits. A run
// counts as one of the sandbox's running processes. Outputs are encoded
// as exec's (revision 3 multipart included, the compile step's in parts
// named "compile.stdout" and "compile.stderr"). Closing the connection
// cancels the run, killing the running phase.
//
// # Git
//
// POST git/{op} (revision 6) runs one operation of package git in the sandbox: op is
// init, clone, status, diff, log, add, commit, checkout, push, fetch,
// pull, worktrees, worktree_add or worktree_remove (another op is
// unsupported, naming "path"). Every body has
//
//	{"dir": "app" (the repository, relative to the workspace; not for init and clone),
//	 "identity": {"name", "email"}, "credentials": {"url": "https://github.com/acme/", "username", "token", "bearer"},
//	 "timeout_ms": per git command, "output_limit": per stream}
//
// plus the fields of the op's options in package git, in snake_case:
//
//	init            {"path", "branch", "bare"}                     -> {"dir"}
//	clone           {"url", "path", "branch", "depth", "single_branch", "no_checkout"} -> {"dir"}
//	status          {"untracked": "normal"|"all"|"no", "paths"}      -> {"status": GitStatus}
//	diff            {"from", "to", "staged", "paths", "context"}     -> {"diff": {"files", "patch", "truncated"}}
//	log             {"rev", "max_count", "skip", "paths"}            -> {"log": [GitCommit]}
//	add             {"paths", "all"}                                 -> {}
//	commit          {"message", "author", "committer", "all", "allow_empty", "amend", "no_verify"} -> {"hash"}
//	checkout        {"branch", "create", "start_point", "detach", "force"} -> {}
//	push            {"remote", "refspecs", "set_upstream", "force", "tags"} -> {}
//	fetch           {"remote", "refspecs", "prune", "depth", "tags"} -> {}
//	pull            {"remote", "branch", "rebase", "ff_only"}        -> {}
//	worktrees       {}                                               -> {"worktrees": [GitWorktree]}
//	worktree_add    {"path", "branch", "existing", "base", "detach"} -> {"dir"}
//	worktree_remove {"path", "force", "delete_branch"}               -> {}
//
// A git command that ran and failed is, like an exec's exit code, data:
// status 200 with
//
//	{"error": {"code": "not_found"|"permission_denied"|"unavailable"|absent,
//	 "kind": "not_repository"|"conflict"|"authentication"|"unreachable"|"rejected"|
//	         "nothing_to_commit"|"local_changes"|"exists"|"not_found"|absent,
//	 "op": "push", "dir": "app", "args": [...], "message": "git's message",
//	 "conflicts": ["path"], "result": Result}}
//
// (result is absent when the failure came before any git command ran,
// as for a dir that does not exist.)
//
// An operation that could not run (invalid fields, a path leaving the
// workspace, no such sandbox) is an error response as everywhere. The
// token of "credentials" authenticates HTTP(S) remotes under its URL only
// and only for the commands that talk to them; it reaches git through
// git's environment-only configuration (not argv, not .git/config, not a
// credential store), is redacted from every message and result returned,
// and is never logged or echoed; send it over TLS or a unix socket. The
// server's maximums bound timeout_ms and output_limit; an operation
// counts as one running process.
//
// # Files
//
// GET files returns a regular file's content (application/octet-stream,
// with Content-Length); larger than limit (default 64 MiB) is
// resource_exhausted; a directory is invalid_argument, unless the
// request's Accept asks for application/json (and not octet-stream): then
// the directory's listing comes, as from files/list. PUT files creates or
// replaces a file with the body, of mode M (default 0644); parents=true
// creates missing parent directories, else a missing one is not_found.
// The server bounds the body (64 MiB by default). Large bodies should send
// "Expect: 100-continue", so a refused write is refused before its body
// is sent. DELETE files removes a file or an empty directory, or a whole
// tree with recursive=true; a symlink is removed, never its target. mkdir
// makes a directory (mode default 0755), with its parents and accepting an
// existing one when parents=true.
//
// FileInfo is
//
//	{"path": "dir/name", "name": "name", "type": "file"|"directory"|"symlink"|"fifo"|"socket"|"device"|"char_device"|"other",
//	 "size": 7, "mode": "0644", "modified_at": "2026-01-02T15:04:05Z", "target": "symlink destination"}
//
// stat describes a path without following a final symlink.
//
// PUT files/tar unpacks the tar body into the directory P (default the
// workspace; created if missing), merging with what is there; entries
// leaving it (by name, symlink or hard link) are refused. GET files/tar
// streams the tree at P as tar, names relative to P, symlinks as links;
// GET snapshot streams the whole workspace, which PUT files/tar?path=.
// restores. Tar streams are sent as they are made; an error after the
// first byte comes in the HTTP trailer "Execbox-Error" (an Error as JSON),
// which a reader must check after the end of the body (a proxy that drops
// trailers hides such errors).
//
// # Relation to KEP-539.2
//
// KEP-539.2 proposes a standard in-sandbox API: REST for files and
// probes, gRPC for processes. This protocol keeps its REST parts where
// they are sound and carries processes over the same HTTP, so one client
// and one socket serve both, plain proxies and curl work, and no
// generated code is needed:
//
//   - Matched: the /v1/ prefix; GET /v1/health answering 200
//     {"status": "ok"} or 503 for Kubernetes probes, without
//     authentication; the FileEntry fields name, type ("file",
//     "directory"), size, mode (octal string) and modified_at (RFC 3339);
//     GET of a directory listing it as JSON; DELETE with recursive=true;
//     PUT with an octal mode; Execute (POST exec), Start with streamed
//     output (POST processes plus the event stream), WriteStdin with an
//     explicit EOF (stdin, stdin/close), SendSignal (signal); /v1/metadata's
//     non-secret sandbox ID, workspace path and what limits apply (GET
//     info, with capabilities); stateful code interpretation, CreateContext
//     and ExecuteCode (POST sessions with kind "python", and runs);
//     ResizeTTY (sessions/{s}/resize).
//   - Differs: file paths travel in ?path= rather than /v1/files/{path},
//     because URL paths are normalised on the way (see Conventions); PUT
//     creates parent directories only with parents=true, as a missing
//     directory usually means a mistaken path; symlinks are listed as
//     "symlink" rather than resolved, since resolving them is how escapes
//     happen; process output is NDJSON or SSE over HTTP rather than a gRPC
//     stream, and every event has a sequence number, so a dropped
//     connection resumes where it broke, which a gRPC stream restarted
//     from scratch cannot. A code context is a session, of Python or of
//     bash (whose shell state persists the same way), and its runs return
//     text: the streams, the repr of a cell's value and a structured
//     exception, rather than rich outputs (images, charts) of a Jupyter
//     kernel. A terminal is a PTY session, not a flag of any process, so
//     resizing it is the session's endpoint; typed input goes through
//     write, and its output through the same event stream as a process's.
//   - Not yet: file watching and rich outputs of cells, which would be
//     later additions to v1.
//
// Conformance is package execboxtest: the same suite runs against every
// runtime, including the remote one through a real server.
package api
