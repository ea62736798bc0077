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
	"strings"
	"sync"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/internal/config"
	"github.com/execbox/execbox/internal/server"
)

// defaultListen is where execbox serve listens without --listen.
const defaultListen = "127.0.0.1:7070"

var serveCommand = &command{
	name:    "serve",
	summary: "serve the HTTP API: sandboxes for remote clients",
	args:    "[flags]",
	help: `Serve runs the execbox HTTP API (protocol ` + api.Protocol + `; see the api package's
documentation): clients create sandboxes of the configured runtime, run
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

Requests must name this server in their Host header (localhost,
127.0.0.1, ::1, the listen address, and --allowed-host names), which
defeats DNS rebinding; a POST or PUT must carry an API content type
(application/json, ...), which defeats cross-site form posts.
The server.* settings (flags --max-*) bound what clients may ask for:
limits, timeouts, sizes, live sandboxes, processes and sessions.

A create request cannot name paths of this machine (a workspace, an
asset's source, an image's layout or tarball) unless --allow-host-paths is
given.

The server manages this machine's image store (images.dir, as 'execbox
image' does) under /v1/images, whatever its runtime: 'execbox image
--runtime remote' lists, pulls, removes and prunes it. With the sandbox
runtime, the server and its sandboxes share one store.

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
	cf.Register(fs, "runtime", "log.level", "log.format", "images.dir", "images.max_size", "server.hosts",
		"server.max_sandboxes", "server.max_processes", "server.max_sessions",
		"server.max_timeout", "server.max_output_limit", "server.max_event_window",
		"server.max_read_size", "server.max_upload_size",
		"server.max_memory", "server.max_pids", "server.max_cpus", "server.max_cpu_time", "server.state_dir")
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
	generated := token == "" && !*noAuth && network == "tcp"
	if generated {
		token = newToken()
	}

	rt, err := cfg.OpenRuntime(ctx, logger, s.err)
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
	srv, err := server.New([]execbox.Runtime{rt}, server.Options{
		Logger:         logger,
		Token:          token,
		AllowHostPaths: *hostPaths,
		Name:           "execbox " + Version,
		Hosts:          allowedHosts(network, ln.Addr(), cfg.Server.Hosts),
		Max:            maximums(&cfg.Server),
		Images:         images,
		StateDir:       serverStateDir(&cfg.Server),
	})
	if err != nil {
		ln.Close()
		return s.fail(ExitFailure, err)
	}
	where := "http://" + ln.Addr().String()
	if network == "unix" {
		where = "unix:" + addr
	}
	auth := "no token"
	switch {
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

	var closeErr error
	err = server.Serve(ctx, ln, srv, logger, func() { closeErr = srv.Close() })
	if err := errors.Join(err, closeErr); err != nil {
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
func maximums(c *config.Server) server.Maximums {
	return server.Maximums{
		Sandboxes:   c.MaxSandboxes,
		Processes:   c.MaxProcesses,
		Sessions:    c.MaxSessions,
		Timeout:     c.MaxTimeout,
		OutputLimit: int64(c.MaxOutputLimit),
		EventWindow: int64(c.MaxEventWindow),
		ReadSize:    int64(c.MaxReadSize),
		UploadSize:  int64(c.MaxUploadSize),
		Limits: execbox.Limits{
			Memory:  int64(c.MaxMemory),
			PIDs:    c.MaxPIDs,
			CPUs:    c.MaxCPUs,
			CPUTime: c.MaxCPUTime,
		},
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

// serverStateDir is server.state_dir, or its default.
func serverStateDir(c *config.Server) string {
	if c.StateDir != "" {
		return c.StateDir
	}
	return server.DefaultStateDir()
}
