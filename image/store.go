//go:build linux

package image

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/execbox/execbox"
)

// Options configure a Store. The zero value is a store in DefaultDir for
// this machine's platform, without a size limit.
type Options struct {
	// Dir is the cache directory, created mode 0700 if missing. Default:
	// DefaultDir().
	Dir string
	// MaxSize bounds the bytes of unpacked roots kept, at all times. A
	// pull counts each entry it writes as its content plus 4 KiB (which
	// bounds inodes as well as bytes); when the store would go past
	// MaxSize, the least recently used images no sandbox uses are
	// removed, and when none is left the pull stops, with an error
	// matching execbox.ErrResourceExhausted and nothing left of it.
	// After a pull, images are removed the same way until the store
	// fits (never the one just pulled). 0: no limit.
	MaxSize int64
	// Platform is the platform picked from multi-platform images, in
	// "os/arch[/variant]" form. Default: runtime.GOOS/runtime.GOARCH.
	Platform string
	// Keychain gives the credentials for registries. nil:
	// authn.DefaultKeychain (~/.docker/config.json, $DOCKER_CONFIG and
	// its credential helpers), then EXECBOX_REGISTRY_USER and
	// EXECBOX_REGISTRY_PASSWORD when set, for the registry
	// EXECBOX_REGISTRY or, unset, any (see UserEnv).
	Keychain authn.Keychain
	// Logger receives what the store does (pulls, prunes). nil: discard.
	Logger *slog.Logger
	// TenantAddr decides which addresses a tenant's pull (one whose
	// context netguard.ForTenant marked: execbox serve does for the
	// creates of non-admin keys) may connect to, besides the registry
	// its reference names (which the server's tenant_registries allowed):
	// where redirects, token realms and layer URLs lead. It is asked the
	// IP and port of each connection, after name resolution. nil:
	// netguard.PublicPort, which refuses loopback, private and
	// link-local addresses. Only the program opening the store sets it
	// (tests of registries on loopback do), never a tenant.
	TenantAddr func(netip.AddrPort) bool
}

// DefaultDir is the cache directory of a Store by default:
// /var/lib/execbox/images for root, else $XDG_CACHE_HOME/execbox/images
// (~/.cache/execbox/images).
func DefaultDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/execbox/images"
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = filepath.Join(os.TempDir(), fmt.Sprintf("execbox-%d", os.Geteuid()))
	}
	return filepath.Join(dir, "execbox", "images")
}

// Store is a cache of unpacked images in one directory, shared by every
// process that opens it. Its methods are safe for concurrent use.
type Store struct {
	dir      string
	maxSize  int64
	platform v1.Platform
	keychain authn.Keychain
	log      *slog.Logger
	tenantIP func(netip.AddrPort) bool

	pulls   flight // by Image.Ref
	unpacks flight // by chain ID

	unpacked atomic.Int64 // roots this Store unpacked, for tests
	reserved atomic.Int64 // bytes taken by unpacks in progress (quota)
}

// Subdirectories of the store's directory.
const (
	rootsDir = "roots" // <chain>/rootfs, <chain>/lock: the roots
	refsDir  = "refs"  // <sha256 of Image.Ref>.json: the references
	locksDir = "locks" // <chain>.lock: held while unpacking or removing
	tmpDir   = "tmp"   // <chain>-*: roots being unpacked; trash-*: being removed
)

// Open opens (creating it) the store in opts.Dir. Temporary directories
// left by processes that died while unpacking are removed.
func Open(opts Options) (*Store, error) {
	s := &Store{dir: opts.Dir, maxSize: opts.MaxSize, keychain: opts.Keychain, log: opts.Logger, tenantIP: opts.TenantAddr}
	if s.dir == "" {
		s.dir = DefaultDir()
	}
	if opts.MaxSize < 0 {
		return nil, execbox.Invalid("max_size", "must not be negative")
	}
	p := opts.Platform
	if p == "" {
		p = runtime.GOOS + "/" + runtime.GOARCH
	}
	plat, err := v1.ParsePlatform(p)
	if err != nil || plat.OS == "" || plat.Architecture == "" || strings.Count(p, "/") > 2 {
		return nil, execbox.Invalid("platform", "%q is not os/arch[/variant]", p)
	}
	s.platform = *plat
	if s.keychain == nil {
		s.keychain = defaultKeychain()
	}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if s.dir, err = filepath.Abs(s.dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}
	for _, d := range []string{rootsDir, refsDir, locksDir, tmpDir} {
		if err := os.Mkdir(filepath.Join(s.dir, d), 0o700); err != nil && !os.IsExist(err) {
			return nil, fmt.Errorf("image store: %w", err)
		}
	}
	s.cleanTmp()
	return s, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

func (s *Store) path(elem ...string) string {
	return filepath.Join(append([]string{s.dir}, elem...)...)
}

// rootDir is the directory of the root of the chain ID hex.
func (s *Store) rootDir(chain string) string { return s.path(rootsDir, chain) }

// cleanTmp removes the temporary directories that nobody is working in:
// an unpack holds its chain's lock (which a dead process no longer
// does); a trash directory is removed by whoever gets to it.
func (s *Store) cleanTmp() {
	ents, err := os.ReadDir(s.path(tmpDir))
	if err != nil {
		return
	}
	for _, e := range ents {
		n := e.Name()
		if chain, _, ok := strings.Cut(n, "-"); ok && chain != "trash" {
			unlock, err := tryLock(s.path(locksDir, chain+".lock"))
			if err != nil {
				continue // being unpacked, or unknown: leave it
			}
			s.log.Info("removing a stale unpack", "dir", n)
			removeAll(s.path(tmpDir, n))
			unlock()
			continue
		}
		removeAll(s.path(tmpDir, n))
	}
}

// flight runs one call per key at a time; callers of the same key while
// it runs share its result (a small singleflight).
type flight struct {
	mu    sync.Mutex
	calls map[string]*call
}

type call struct {
	done chan struct{}
	img  *Image
	err  error
}

// do calls fn, or waits for the call of key already running. A waiter
// whose context is still alive retries when the running call was
// cancelled by its own caller's context.
func (f *flight) do(ctx context.Context, key string, fn func() (*Image, error)) (*Image, error) {
	for {
		f.mu.Lock()
		if f.calls == nil {
			f.calls = map[string]*call{}
		}
		c, ok := f.calls[key]
		if !ok {
			c = &call{done: make(chan struct{})}
			f.calls[key] = c
			f.mu.Unlock()
			c.img, c.err = fn()
			f.mu.Lock()
			delete(f.calls, key)
			f.mu.Unlock()
			close(c.done)
			return c.img, c.err
		}
		f.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.done:
		}
		if c.err != nil && isContextErr(c.err) && ctx.Err() == nil {
			continue
		}
		return c.img, c.err
	}
}

// now is time.Now, for tests of LRU order.
var now = time.Now
