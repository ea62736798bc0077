package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/internal/config"
	"github.com/execbox/execbox/internal/metrics"
	"github.com/execbox/execbox/internal/server"
)

// defaultListen is where execbox serve listens without --listen.
const defaultListen = "127.0.0.1:7070"

var serveCommand = &command{
	name:    "serve",
	summary: "serve the HTTP API: sandboxes for remote clients",
	args:    "[flags]",
	help: `Serve runs the execbox HTTP API (protocol ` + api.Protocol + `; see the api package's
documentation, GET /v1/openapi.yaml, and docs/server.md): clients create sandboxes of the configured runtime, run
commands in them and read and write their files. The remote runtime is its
Go client: runtimes.remote.url in execbox.yaml points at it.

--listen takes HOST:PORT or unix:PATH. Every request but GET /v1/health
and /v1/version must carry the bearer token (Authorization: Bearer
TOKEN), on every address, loopback included: a web page in a browser on
this machine reaches loopback too. The token is read from the environment
variable --token-env names (EXECBOX_TOKEN by default; execbox then blanks
it in its own environment, /proc/PID/environ included, so neither commands
nor other processes read it there); without one, execbox generates one
and prints how to use it. On a unix socket (mode 0600: only this user
connects) the token is optional: none is generated. --no-auth serves
without a token anyway; then any local user or web page can run commands.

Tenants: API keys in server.keys (the config file) or the file
--keys-file names (YAML or JSON: a list of {name, key or key_sha256,
admin, max_sandboxes, max_memory, max_pids, max_cpus, max_cpu_time}).
Each key owns the sandboxes it creates: other keys get not_found for
them, and its list shows its own. Admin keys, and the token of
--token-env (named "admin"), see and manage all, and alone may use the
image store, define pools and read /metrics. With keys, no token is generated. A key's owner can hand one
sandbox to a less trusted client: POST /v1/sandboxes/ID/tokens returns a
token for that sandbox's own endpoints only.

Requests must name this server in their Host header (localhost,
127.0.0.1, ::1, the listen address, and --allowed-host names), which
defeats DNS rebinding; a POST or PUT must carry an API content type
(application/json, ...), which defeats cross-site form posts.
The server.* settings (flags --max-*) bound what clients may ask for:
limits, timeouts, sizes, live sandboxes, processes and sessions.

With --policy-url (server.policy_url), every create, exec, process
start, session open and run, file change, code run and git operation is
first POSTed as JSON to
that webhook, which answers {"allow": true} or {"allow": false,
"reason": "..."}; a denial is permission_denied with the reason, and a
hook that cannot be asked (down, slower than --policy-timeout, answering
anything else) refuses the action with unavailable.

Sandboxes end by themselves: a sandbox lives at most --sandbox-timeout
(1h) from its creation, and at most --sandbox-idle-timeout (30m) without
a call, a running process or an open session, unless its spec asks
otherwise (timeout_ms, idle_timeout_ms, within --max-sandbox-timeout and
--max-sandbox-idle-timeout, 24h each); a client extends a lifetime with
POST /v1/sandboxes/{id}/timeout. A sandbox whose boundary is lost (its
agent died) is marked failed and closed. An ended sandbox's ID answers
its last state: when and why it ended.

Warm pools (server.pools in the config file, or POST /v1/pools) keep
sandboxes made ahead of demand from a template; a create whose spec names
a pool ("pool": NAME) takes one at once and binds its env, labels and
files then. A taken sandbox is never handed to anyone else.

A create request cannot name paths of this machine (a workspace, an
asset's source, an image's layout or tarball) unless --allow-host-paths is
given.

The server manages this machine's image store (images.dir, as 'execbox
image' does) under /v1/images, whatever its runtime: 'execbox image
--runtime remote' lists, pulls, removes and prunes it. With the sandbox
runtime, the server and its sandboxes share one store.

GET /metrics serves Prometheus metrics (requests, execs, creates, live
and closed sandboxes, pools; no IDs), behind an admin key. --metrics-listen
ADDR serves them alone, without the token, on a second address for a
scraper. With --log-level info every request is logged; X-Request-ID
ties a request to its log lines, the server's and the sandbox agent's.

On SIGTERM or SIGINT execbox stops accepting connections, closes every
sandbox (killing everything they started), and exits 0. Killed instead
(SIGKILL, a crash), it cannot: the next execbox serve removes, before it
serves, what those sandboxes left (processes, cgroups, mounts, containers,
temporary workspaces), and answers their IDs "closed", saying they were
lost (it finds them in --state-dir, server.state_dir).`,
	run: runServe,
}

func runServe(ctx context.Context, c *command, s *stdio, args []string) int {
	fs := newFlagSet(c)
	var cf config.Flags
	cf.Register(fs, "runtime", "log.level", "log.format", "images.dir", "images.max_size", "server.hosts", "server.metrics_listen",
		"server.max_sandboxes", "server.max_processes", "server.max_sessions",
		"server.max_timeout", "server.max_output_limit", "server.max_event_window",
		"server.max_read_size", "server.max_upload_size", "server.max_result_memory", "server.min_read_rate",
		"server.max_memory", "server.max_pids", "server.max_cpus", "server.max_cpu_time", "server.keys_file",
		"server.policy_url", "server.policy_timeout", "server.policy_token_env",
		"server.sandbox_timeout", "server.max_sandbox_timeout", "server.sandbox_idle_timeout", "server.max_sandbox_idle_timeout",
		"server.state_dir", "server.tenant_registries")
	listen := fs.String("listen", defaultListen, "`ADDR` to listen on: HOST:PORT, or unix:PATH for a unix socket (mode 0600)")
	tokenEnv := fs.String("token-env", "EXECBOX_TOKEN", "environment `VARIABLE` holding the bearer token clients must send (default: a generated one)")
	noAuth := fs.Bool("no-auth", false, "serve without a token: anyone who reaches the address runs commands")
	hostPaths := fs.Bool("allow-host-paths", false, "let clients name paths of this machine (spec workspace, asset sources)")
	if code, done := s.parse(c, fs, args); done {
		return code
	}
	if fs.NArg() > 0 {
		return s.fail(ExitUsage, fmt.Errorf("serve: takes no arguments, got %q", fs.Args()))
	}
	token := os.Getenv(*tokenEnv)
	// Commands of the local runtime inherit execbox's environment under
	// EnvInherit, and /proc/PID/environ shows the initial one: the token
	// must be in neither.
	os.Unsetenv(*tokenEnv)
	if token != "" {
		if err := scrubEnviron(*tokenEnv); err != nil {
			s.warn("could not blank $%s in /proc/%d/environ (processes of this user can read the token there): %v", *tokenEnv, os.Getpid(), err)
		}
	}
	network, addr := "tcp", *listen
	if p, ok := strings.CutPrefix(*listen, "unix:"); ok {
		network, addr = "unix", p
	}
	cfg, code, ok := s.loadConfig(&cf)
	if !ok {
		return code
	}
	logger := cfg.Logger(s.err)
	keys, err := cfg.Keys()
	if err == nil && len(keys) > 0 && *noAuth {
		err = fmt.Errorf("serve: --no-auth and API keys (server.keys, server.keys_file) contradict each other")
	}
	if err != nil {
		return s.fail(ExitUsage, err)
	}
	policy, err := servePolicy(s, &cfg.Server)
	if err != nil {
		return s.fail(errorCode(err), cfg.Annotate(err))
	}
	generated := token == "" && !*noAuth && network == "tcp" && len(keys) == 0
	if generated {
		token = newToken()
	}

	rt, err := cfg.OpenServerRuntime(ctx, logger)
	if err != nil {
		return s.fail(errorCode(err), cfg.Annotate(err))
	}
	rt, images, err := serveImages(s, cfg, logger, rt)
	if err != nil {
		return s.fail(errorCode(err), cfg.Annotate(err))
	}
	if h := rt.Health(ctx); !h.Available {
		s.warn("runtime %s is not available: %s (creating sandboxes will fail)", rt.Name(), h.Detail)
	}
	server.Sweep(ctx, []execbox.Runtime{rt}, logger)
	ln, err := listenOn(network, addr)
	if err != nil {
		return s.fail(ExitFailure, fmt.Errorf("serve: %w", err))
	}
	setMemoryLimit(&cfg.Server)
	m := metrics.New([]string{rt.Name()})
	srv, err := server.New([]execbox.Runtime{rt}, server.Options{
		Logger:           logger,
		Observer:         m.Observer(),
		Metrics:          m.Handler(),
		Token:            token,
		Keys:             serverKeys(keys),
		TenantRegistries: cfg.Server.TenantRegistries,
		AllowHostPaths:   *hostPaths,
		Name:             "execbox " + Version,
		Hosts:            allowedHosts(network, ln.Addr(), cfg.Server.Hosts),
		Max:              maximums(&cfg.Server),
		MinReadRate:      minReadRate(cfg.Server.MinReadRate),
		Lifetimes:        lifetimes(&cfg.Server),
		Images:           images,
		Policy:           policy,
		Pools:            cfg.Server.Pools,
		StateDir:         serverStateDir(&cfg.Server),
	})
	if err != nil {
		ln.Close()
		// Pool problems name "pools[i].FIELD": shown as the file's keys.
		return s.fail(errorCode(err), cfg.Annotate(execbox.PrefixFields("server.", err)))
	}
	m.WatchLive(srv)
	m.WatchPools(metrics.PoolFunc(func() []metrics.PoolSize { return poolSizes(srv.PoolStats()) }))
	metricsAt, stopMetrics, err := serveMetrics(ctx, cfg.Server.MetricsListen, m, logger)
	if err != nil {
		ln.Close()
		return s.fail(ExitFailure, fmt.Errorf("serve: %w", err))
	}
	where := "http://" + ln.Addr().String()
	if network == "unix" {
		where = "unix:" + addr
	}
	auth := "no token"
	switch {
	case len(keys) > 0:
		auth = fmt.Sprintf("%d API keys", len(keys))
		if token != "" {
			auth += " and the admin token from $" + *tokenEnv
		}
	case generated:
		auth = "a generated token"
	case token != "":
		auth = "token from $" + *tokenEnv
	case network == "unix":
		auth = "no token (unix socket, mode 0600)"
	}
	s.warn("serving the API (protocol %s) on %s, runtime %s, %s", api.Protocol, where, rt.Name(), auth)
	if generated {
		s.warn("clients must send the token generated for this run:\n"+
			"    Authorization: Bearer %s\n"+
			"execbox clients (runtime remote, url %s) read it from $EXECBOX_TOKEN:\n"+
			"    export EXECBOX_TOKEN=%s\n"+
			"set $%s before starting the server to choose it", token, where, token, *tokenEnv)
	}
	if metricsAt != "" {
		s.warn("metrics, without a token, at %s", metricsAt)
	}

	var closeErr error
	err = server.Serve(ctx, ln, srv, logger, func() { closeErr = srv.Close() })
	if err := errors.Join(err, closeErr, stopMetrics()); err != nil {
		return s.fail(ExitFailure, fmt.Errorf("serve: %w", err))
	}
	return 0
}

// newToken returns a new random bearer token: 256 bits, hex.
func newToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b)
}

// allowedHosts returns the names a request's Host may carry: the loopback
// names, the listen address's host, and extra. A unix socket allows any:
// no browser reaches it.
func allowedHosts(network string, addr net.Addr, extra []string) []string {
	if network == "unix" {
		return nil
	}
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if ta, ok := addr.(*net.TCPAddr); ok && !ta.IP.IsUnspecified() {
		hosts = append(hosts, ta.IP.String())
	}
	return append(hosts, extra...)
}

// maximums carries the server.* settings to the server.
// serveBase is what execbox serve itself needs beside what it holds for
// callers (server.max_result_memory): code, goroutines, connections,
// sandbox bookkeeping (docs/server.md, "Memory").
const serveBase = 128 << 20

// setMemoryLimit makes the Go collector work to keep the heap within
// what the server may hold for callers plus its base, rather than let it
// grow to twice the live heap, unless GOMEMLIMIT says otherwise.
func setMemoryLimit(c *config.Server) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	budget := int64(c.MaxResultMemory)
	if budget <= 0 {
		budget = server.DefaultResultMemory
	}
	debug.SetMemoryLimit(budget + serveBase)
}

// minReadRate is server.min_read_rate for the server: 0 there is no
// minimum.
func minReadRate(rate config.Size) int64 {
	if rate == 0 {
		return -1
	}
	return int64(rate)
}

func maximums(c *config.Server) server.Maximums {
	return server.Maximums{
		Sandboxes:    c.MaxSandboxes,
		Processes:    c.MaxProcesses,
		Sessions:     c.MaxSessions,
		Timeout:      c.MaxTimeout,
		OutputLimit:  int64(c.MaxOutputLimit),
		EventWindow:  int64(c.MaxEventWindow),
		ReadSize:     int64(c.MaxReadSize),
		UploadSize:   int64(c.MaxUploadSize),
		ResultMemory: int64(c.MaxResultMemory),
		Limits: execbox.Limits{
			Memory:  int64(c.MaxMemory),
			PIDs:    c.MaxPIDs,
			CPUs:    c.MaxCPUs,
			CPUTime: c.MaxCPUTime,
		},
	}
}

// lifetimes carries the server.*sandbox*timeout settings to the server.
func lifetimes(c *config.Server) server.Lifetimes {
	return server.Lifetimes{
		Timeout: c.SandboxTimeout, MaxTimeout: c.MaxSandboxTimeout,
		IdleTimeout: c.SandboxIdleTimeout, MaxIdleTimeout: c.MaxSandboxIdleTimeout,
	}
}

// listenOn listens on a TCP address or a unix socket. A unix socket file
// left by a server that is gone is replaced; the socket is for its owner
// only.
func listenOn(network, addr string) (net.Listener, error) {
	if network == "unix" {
		if fi, err := os.Lstat(addr); err == nil && fi.Mode()&os.ModeSocket != 0 {
			if c, err := net.Dial("unix", addr); err == nil {
				c.Close()
				return nil, fmt.Errorf("%s: another server is listening there", addr)
			}
			os.Remove(addr)
		}
		return listenPrivate(addr)
	}
	return net.Listen(network, addr)
}

// listenPrivate listens on a unix socket at addr that nobody else can
// connect to at any moment: it is made, and made 0600, in a new 0700
// directory beside addr, then renamed into place (created at addr, it
// would follow the umask until a chmod).
func listenPrivate(addr string) (net.Listener, error) {
	dir, err := os.MkdirTemp(filepath.Dir(addr), ".execbox-listen-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, "sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(false)
	if err = os.Chmod(tmp, 0o600); err == nil {
		err = os.Rename(tmp, addr)
	}
	if err != nil {
		ln.Close()
		return nil, err
	}
	return &unlinkOnClose{UnixListener: ln, path: addr}, nil
}

// unlinkOnClose removes its socket file when closed, as a listener made
// at its path would.
type unlinkOnClose struct {
	*net.UnixListener
	path string
	once sync.Once
}

func (l *unlinkOnClose) Close() error {
	err := l.UnixListener.Close()
	l.once.Do(func() { os.Remove(l.path) })
	return err
}

// poolSizes are the pools' statuses as the pool gauges read them.
func poolSizes(pools []api.PoolStatus) []metrics.PoolSize {
	out := make([]metrics.PoolSize, len(pools))
	for i, p := range pools {
		out[i] = metrics.PoolSize{Pool: p.Name, Idle: int(p.Idle), Creating: int(p.Creating), Desired: int(p.MinIdle), Max: int(p.Max)}
	}
	return out
}

// serverStateDir is server.state_dir, or its default.
func serverStateDir(c *config.Server) string {
	if c.StateDir != "" {
		return c.StateDir
	}
	return server.DefaultStateDir()
}
