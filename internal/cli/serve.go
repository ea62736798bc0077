package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

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

--listen takes HOST:PORT or unix:PATH. The bearer token is read from the
environment variable --token-env names (EXECBOX_TOKEN by default); every
request but GET /v1/health and /v1/version must then carry it. Without a
token execbox serves only on a loopback address or a unix socket, unless
--no-auth says otherwise: the API runs arbitrary commands.

A create request cannot name paths of this machine (a workspace, an
asset's source) unless --allow-host-paths is given.

On SIGTERM or SIGINT execbox stops accepting connections, closes every
sandbox (killing everything they started), and exits 0.`,
	run: runServe,
}

func runServe(ctx context.Context, c *command, s *stdio, args []string) int {
	fs := newFlagSet(c)
	var cf config.Flags
	cf.Register(fs, "runtime", "log.level", "log.format")
	listen := fs.String("listen", defaultListen, "`ADDR` to listen on: HOST:PORT, or unix:PATH for a unix socket")
	tokenEnv := fs.String("token-env", "EXECBOX_TOKEN", "environment `VARIABLE` holding the bearer token clients must send")
	noAuth := fs.Bool("no-auth", false, "serve without a token on a non-loopback address")
	hostPaths := fs.Bool("allow-host-paths", false, "let clients name paths of this machine (spec workspace, asset sources)")
	if code, done := s.parse(c, fs, args); done {
		return code
	}
	if fs.NArg() > 0 {
		return s.fail(ExitUsage, fmt.Errorf("serve: takes no arguments, got %q", fs.Args()))
	}
	token := os.Getenv(*tokenEnv)
	// Commands of the local runtime inherit execbox's environment under
	// EnvInherit: the token must not be in it.
	os.Unsetenv(*tokenEnv)
	network, addr := "tcp", *listen
	if p, ok := strings.CutPrefix(*listen, "unix:"); ok {
		network, addr = "unix", p
	}
	if token == "" && !*noAuth && network == "tcp" && !loopback(addr) {
		return s.fail(ExitUsage, fmt.Errorf("serve: refusing to serve on %s without a token: set $%s, or pass --no-auth", *listen, *tokenEnv))
	}
	cfg, code, ok := s.loadConfig(&cf)
	if !ok {
		return code
	}
	logger := cfg.Logger(s.err)

	rt, err := cfg.OpenRuntime(ctx, logger, s.err)
	if err != nil {
		return s.fail(errorCode(err), cfg.Annotate(err))
	}
	if h := rt.Health(ctx); !h.Available {
		s.warn("runtime %s is not available: %s (creating sandboxes will fail)", rt.Name(), h.Detail)
	}
	srv, err := server.New([]execbox.Runtime{rt}, server.Options{
		Logger:         logger,
		Token:          token,
		AllowHostPaths: *hostPaths,
		Name:           "execbox " + Version,
	})
	if err != nil {
		return s.fail(ExitFailure, err)
	}
	ln, err := listenOn(network, addr)
	if err != nil {
		return s.fail(ExitFailure, fmt.Errorf("serve: %w", err))
	}
	where := "http://" + ln.Addr().String()
	if network == "unix" {
		where = "unix:" + addr
	}
	auth := "no token"
	if token != "" {
		auth = "token from $" + *tokenEnv
	}
	s.warn("serving the API (protocol %s) on %s, runtime %s, %s", api.Protocol, where, rt.Name(), auth)

	var closeErr error
	err = server.Serve(ctx, ln, srv, logger, func() { closeErr = srv.Close() })
	if err := errors.Join(err, closeErr); err != nil {
		return s.fail(ExitFailure, fmt.Errorf("serve: %w", err))
	}
	return 0
}

// loopback reports whether addr (HOST:PORT) is on a loopback address.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
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
		ln, err := net.Listen("unix", addr)
		if err != nil {
			return nil, err
		}
		if err := os.Chmod(addr, 0o600); err != nil {
			ln.Close()
			return nil, err
		}
		return ln, nil
	}
	return net.Listen(network, addr)
}
