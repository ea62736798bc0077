package git

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/execbox/execbox"
)

// Options configure a Client. The zero value works: git from the
// sandbox's PATH, a clean environment, no credentials, no identity.
type Options struct {
	// Credentials authenticate HTTP(S) remotes; nil sends none. See the
	// package documentation for how the token is kept out of argv, stored
	// URLs, logs and errors.
	Credentials *Credentials

	// Identity is the author and committer of commits git makes on the
	// caller's behalf (Commit without an author, merge commits of Pull and
	// Merge). Nil means Commit requires CommitOptions.Author and merges
	// use whatever the repository's own config says.
	Identity *Signature

	// Git is the git program, found in the command's PATH unless it
	// contains a slash. Empty means "git".
	Git string

	// Home is HOME for git, so that no user-level file (~/.gitconfig,
	// ~/.config/git/ignore, attributes) of the host or the workspace is
	// read. Empty means "/nonexistent". Global and system config are
	// skipped in any case (GIT_CONFIG_GLOBAL=/dev/null, GIT_CONFIG_NOSYSTEM).
	Home string

	// EnvPolicy is the environment policy of git commands. Empty means
	// execbox.EnvClean (not the sandbox's policy): git reads many GIT_*
	// variables (GIT_DIR, GIT_TRACE, ...) that must not leak in. Use
	// EnvAllow with EnvAllow naming, for example, HTTPS_PROXY.
	EnvPolicy execbox.EnvPolicy
	// EnvAllow names the variables passed under execbox.EnvAllow.
	EnvAllow []string
	// Env adds variables to every git command (GIT_SSH_COMMAND, proxies).
	// It cannot override the variables this package sets for isolation.
	Env map[string]string

	// Timeout bounds each git command. Zero means execbox.DefaultTimeout;
	// CloneOptions.Timeout overrides it for a clone.
	Timeout time.Duration
	// OutputLimit caps the bytes kept of each stream of a git command.
	// Zero means execbox.DefaultOutputLimit. Parsed output (status, log,
	// worktree list) beyond it is an error of kind
	// execbox.ErrResourceExhausted; a patch is returned cut and flagged.
	OutputLimit int64

	// Logger receives one Debug record per git command (op, argv, dir,
	// outcome; never the environment). Nil discards.
	Logger *slog.Logger
}

// Credentials are a token for HTTP(S) remotes under one URL prefix.
type Credentials struct {
	// URL is the prefix of the remote URLs the token is for, matched the
	// way git matches http.<url>.* settings: same scheme, same host (and
	// port), path prefix at a '/' boundary. For example
	// "https://github.com/" or "https://github.com/acme/". Required: the
	// token is never sent to a server the caller did not name, even when a
	// remote's URL is changed inside the sandbox.
	URL string
	// Username is sent with the token in HTTP Basic authentication.
	// Empty means "x-access-token" (GitHub's convention; GitLab and
	// Bitbucket accept any name with a personal or project access token).
	Username string
	// Token is the secret: a personal access token, an app installation
	// token, a password.
	Token string
	// Bearer sends "Authorization: Bearer TOKEN" instead of HTTP Basic
	// (Azure DevOps, some self-hosted servers).
	Bearer bool
}

// Signature is a person's name and email, as in a commit.
type Signature struct {
	Name  string // e.g. "Ada Lovelace"; required
	Email string // e.g. "ada@example.com"; required
}

// String returns "Name <email>".
func (s Signature) String() string { return s.Name + " <" + s.Email + ">" }

func (s *Signature) validate(field string) []error {
	var errs []error
	if s.Name == "" || strings.TrimSpace(s.Name) == "" {
		errs = append(errs, execbox.Invalid(field+".name", "is required"))
	}
	if s.Email == "" {
		errs = append(errs, execbox.Invalid(field+".email", "is required"))
	}
	if strings.ContainsAny(s.Name, "<>\n\x00") {
		errs = append(errs, execbox.Invalid(field+".name", "must not contain '<', '>', a newline or a NUL byte"))
	}
	if strings.ContainsAny(s.Email, "<>\n\x00") {
		errs = append(errs, execbox.Invalid(field+".email", "must not contain '<', '>', a newline or a NUL byte"))
	}
	return errs
}

// Client runs git in one sandbox. It holds no state besides its options
// and is safe for concurrent use; so is every Repo it returns.
type Client struct {
	sb    execbox.Sandbox
	opts  Options
	log   *slog.Logger
	auth  *auth // nil without credentials
	redac *redactor
	// host: sb is not isolated, so git runs where the repository's
	// config must not choose programs (hostconfig.go).
	host bool
}

// New returns a Client running git in sb with opts. It panics if opts
// carry invalid credentials (a programming error); use NewClient to get an
// error instead.
func New(sb execbox.Sandbox, opts Options) *Client {
	c, err := NewClient(sb, opts)
	if err != nil {
		panic("git.New: " + err.Error())
	}
	return c
}

// NewClient is New returning an error of kind execbox.ErrInvalidArgument,
// naming the field, when opts are invalid.
func NewClient(sb execbox.Sandbox, opts Options) (*Client, error) {
	if sb == nil {
		return nil, execbox.Invalid("sandbox", "is required")
	}
	var errs []error
	var a *auth
	if opts.Credentials != nil {
		var err error
		if a, err = newAuth(opts.Credentials); err != nil {
			errs = append(errs, err)
		}
	}
	if opts.Identity != nil {
		errs = append(errs, opts.Identity.validate("identity")...)
	}
	if opts.Timeout < 0 {
		errs = append(errs, execbox.Invalid("timeout", "must not be negative"))
	}
	if opts.OutputLimit < 0 {
		errs = append(errs, execbox.Invalid("output_limit", "must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if opts.Git == "" {
		opts.Git = "git"
	}
	if opts.Home == "" {
		opts.Home = "/nonexistent"
	}
	if opts.EnvPolicy == "" {
		opts.EnvPolicy = execbox.EnvClean
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Client{sb: sb, opts: opts, log: log, auth: a, redac: newRedactor(a), host: !isolated(sb)}
	return c, nil
}

// Sandbox returns the sandbox the client runs git in.
func (c *Client) Sandbox() execbox.Sandbox { return c.sb }

// Repo returns the repository at dir (relative to the workspace, or
// absolute inside it) without checking that it is one; operations on a
// directory that is not a repository fail with ErrNotRepository. Use Open
// to check first.
func (c *Client) Repo(dir string) (*Repo, error) {
	rel, err := c.workspacePath("dir", dir)
	if err != nil {
		return nil, err
	}
	return &Repo{c: c, dir: rel}, nil
}

// Open returns the repository whose working tree contains dir (relative to
// the workspace, or absolute inside it), bound to dir itself. It fails
// with ErrNotRepository when dir is missing or is not inside a working
// tree.
func (c *Client) Open(ctx context.Context, dir string) (*Repo, error) {
	r, err := c.Repo(dir)
	if err != nil {
		return nil, err
	}
	if _, err := r.git(ctx, call{op: "open", args: []string{"rev-parse", "--is-inside-work-tree"}}); err != nil {
		return nil, err
	}
	return r, nil
}

// InitOptions for Client.Init.
type InitOptions struct {
	// Path is the directory to create the repository in, relative to the
	// workspace; created if missing. Empty means the workspace itself.
	Path string
	// Branch is the initial branch. Empty means "main" (not git's
	// configurable default, so the result does not depend on the host).
	Branch string
	// Bare makes a bare repository (no working tree), as a remote.
	Bare bool
}

// Init creates a repository (git init) and returns it.
func (c *Client) Init(ctx context.Context, opts InitOptions) (*Repo, error) {
	if rep, ok, err := c.delegated(ctx, Call{Op: OpInit, Init: opts}); ok {
		return c.repoOf(rep, err)
	}

	rel, err := c.workspacePath("path", opts.Path)
	if err != nil {
		return nil, err
	}
	branch := opts.Branch
	if branch == "" {
		branch = "main"
	}
	if err := checkRef("branch", branch); err != nil {
		return nil, err
	}
	args := []string{"init", "--quiet", "--initial-branch=" + branch}
	if opts.Bare {
		args = append(args, "--bare")
	}
	args = append(args, "--", c.abs(rel))
	if _, err := c.git(ctx, call{op: "init", args: args}); err != nil {
		return nil, err
	}
	return &Repo{c: c, dir: rel}, nil
}

// CloneOptions for Client.Clone.
type CloneOptions struct {
	// URL of the repository: https://, http://, ssh://, scp-like
	// user@host:path, file:// or a path. It must not carry a password:
	// git would store it in .git/config; use Options.Credentials.
	URL string
	// Path is the directory to clone into, relative to the workspace. It
	// must not exist or be empty. Empty means the last component of URL
	// without ".git", as git does.
	Path string
	// Branch to check out instead of the remote's HEAD; a tag also works.
	Branch string
	// Depth makes a shallow clone of that many commits (and implies a
	// single branch). Zero means the full history.
	Depth int
	// SingleBranch fetches only Branch (or the remote's HEAD).
	SingleBranch bool
	// NoCheckout leaves the working tree empty.
	NoCheckout bool
	// Timeout bounds the clone; zero means Options.Timeout.
	Timeout time.Duration
}

// Clone clones a repository into the workspace and returns it.
func (c *Client) Clone(ctx context.Context, opts CloneOptions) (*Repo, error) {
	if rep, ok, err := c.delegated(ctx, Call{Op: OpClone, Clone: opts}); ok {
		return c.repoOf(rep, err)
	}

	var errs []error
	if opts.URL == "" {
		errs = append(errs, execbox.Invalid("url", "is required"))
	} else if err := checkURL("url", opts.URL); err != nil {
		errs = append(errs, err)
	}
	p := opts.Path
	if p == "" && opts.URL != "" {
		p = defaultClonePath(opts.URL)
		if p == "" {
			errs = append(errs, execbox.Invalid("path", "is required: no directory name can be derived from the URL"))
		}
	}
	rel, err := c.workspacePath("path", p)
	if err != nil {
		errs = append(errs, err)
	}
	if opts.Branch != "" {
		if err := checkRef("branch", opts.Branch); err != nil {
			errs = append(errs, err)
		}
	}
	if opts.Depth < 0 {
		errs = append(errs, execbox.Invalid("depth", "must not be negative"))
	}
	if opts.Timeout < 0 {
		errs = append(errs, execbox.Invalid("timeout", "must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	args := []string{"clone", "--quiet"}
	if opts.Branch != "" {
		args = append(args, "--branch", opts.Branch)
	}
	if opts.Depth > 0 {
		args = append(args, "--depth", fmt.Sprint(opts.Depth))
	}
	if opts.SingleBranch {
		args = append(args, "--single-branch")
	}
	if opts.NoCheckout {
		args = append(args, "--no-checkout")
	}
	args = append(args, "--", opts.URL, c.abs(rel))
	if _, err := c.git(ctx, call{op: "clone", args: args, urls: []string{opts.URL}, timeout: opts.Timeout}); err != nil {
		return nil, err
	}
	return &Repo{c: c, dir: rel}, nil
}

// PrepareOptions for Client.Prepare.
type PrepareOptions struct {
	// Path is the repository's directory, relative to the workspace.
	// Empty means the workspace itself when URL is empty, else the
	// clone's default path.
	Path string
	// URL, if set, is cloned into Path unless Path already holds a
	// repository (and Fresh is false). Empty means Path must already be a
	// repository (pre-cloned).
	URL string
	// Fresh always clones: Path must not exist or be empty. It never
	// deletes anything.
	Fresh bool
	// Branch, Depth and Timeout are passed to Clone.
	Branch  string
	Depth   int
	Timeout time.Duration
}

// Prepare returns the repository a task works on: the one already at
// opts.Path (a pre-cloned repository), or a fresh clone of opts.URL.
// It answers the open question of seed 004 with a per-call choice:
// reuse by default, Fresh to insist on a new clone.
func (c *Client) Prepare(ctx context.Context, opts PrepareOptions) (*Repo, error) {
	if opts.URL == "" {
		if opts.Fresh {
			return nil, execbox.Invalid("url", "is required with fresh")
		}
		return c.Open(ctx, opts.Path)
	}
	clone := CloneOptions{URL: opts.URL, Path: opts.Path, Branch: opts.Branch, Depth: opts.Depth, Timeout: opts.Timeout}
	if !opts.Fresh {
		p := opts.Path
		if p == "" {
			p = defaultClonePath(opts.URL)
		}
		r, err := c.Open(ctx, p)
		switch {
		case err == nil:
			// The top level of a repository, not a directory inside one.
			top, _, err := r.top(ctx)
			if err != nil {
				return nil, err
			}
			if top == r.dir {
				return r, nil
			}
		case !errors.Is(err, ErrNotRepository):
			return nil, err
		}
	}
	return c.Clone(ctx, clone)
}

// workspacePath checks p (relative to the workspace, or absolute inside
// it) and returns it relative to the workspace, cleaned, "." for the
// workspace itself.
func (c *Client) workspacePath(field, p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", execbox.Invalid(field, "contains a NUL byte")
	}
	if p == "" {
		return ".", nil
	}
	if path.IsAbs(p) {
		ws := path.Clean(c.sb.Workspace())
		cp := path.Clean(p)
		switch {
		case cp == ws:
			return ".", nil
		case strings.HasPrefix(cp, ws+"/") || ws == "/":
			p = strings.TrimPrefix(strings.TrimPrefix(cp, ws), "/")
		default:
			return "", &execbox.FieldError{Field: field, Problem: fmt.Sprintf("%q is outside the workspace", p), Kind: execbox.ErrPermission}
		}
	}
	p = path.Clean(p)
	if p == ".." || strings.HasPrefix(p, "../") {
		return "", &execbox.FieldError{Field: field, Problem: fmt.Sprintf("%q leaves the workspace", p), Kind: execbox.ErrPermission}
	}
	return p, nil
}

// abs returns the path commands see for the workspace-relative rel.
func (c *Client) abs(rel string) string {
	return path.Join(c.sb.Workspace(), rel)
}

// rel maps a path git printed (absolute, as commands see it) back to the
// workspace, known as Workspace() or as the real path realWS (git prints
// paths with symlinks resolved); a path outside stays absolute.
func (c *Client) rel(p, realWS string) string {
	cp := path.Clean(p)
	for _, ws := range []string{c.sb.Workspace(), realWS} {
		if ws == "" {
			continue
		}
		ws = path.Clean(ws)
		if cp == ws {
			return "."
		}
		if r, ok := strings.CutPrefix(cp, ws+"/"); ok {
			return r
		}
	}
	return p
}

// defaultClonePath derives the directory git clone would pick.
func defaultClonePath(u string) string {
	s := strings.TrimRight(u, "/")
	if i := strings.LastIndexAny(s, "/:"); i >= 0 {
		s = s[i+1:]
	}
	s = strings.TrimSuffix(s, ".git")
	if s == "" || s == "." || s == ".." {
		return ""
	}
	return s
}

// checkRef refuses a ref or revision that git could take for an option,
// or that contains bytes no ref may hold.
func checkRef(field, ref string) error {
	switch {
	case ref == "":
		return execbox.Invalid(field, "is required")
	case strings.HasPrefix(ref, "-"):
		return execbox.Invalid(field, "%q must not start with '-'", ref)
	case strings.ContainsAny(ref, "\x00\n\r"):
		return execbox.Invalid(field, "contains a NUL byte or a newline")
	}
	return nil
}

// checkURL refuses URLs that git would take for an option or that carry a
// password (git stores remote URLs in .git/config verbatim). The URL in
// the message has its password masked.
func checkURL(field, raw string) error {
	if err := checkRef(field, raw); err != nil {
		return err
	}
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		if _, has := u.User.Password(); has {
			return execbox.Invalid(field, "%s carries a password, which git would store in .git/config: pass it in Options.Credentials", u.Redacted())
		}
	}
	return nil
}

// Repo is a git repository (a working tree, or a bare repository) in the
// workspace. It is a handle: cheap, stateless and safe for concurrent
// use, although git itself serialises most writes to one repository.
type Repo struct {
	c   *Client
	dir string // relative to the workspace; "." for the workspace
	cfg []string
}

// Dir is the repository's directory relative to the workspace ("." for
// the workspace itself).
func (r *Repo) Dir() string { return r.dir }

// Path is the repository's directory as commands in the sandbox see it.
func (r *Repo) Path() string { return r.c.abs(r.dir) }

// Client returns the client the repository belongs to.
func (r *Repo) Client() *Client { return r.c }

// top returns the repository's top level relative to the workspace, and
// the workspace's real path as git sees it (symlinks resolved; "" when it
// cannot be told).
func (r *Repo) top(ctx context.Context) (top, realWS string, err error) {
	res, err := r.git(ctx, call{op: "top", args: []string{"rev-parse", "--show-cdup", "--show-toplevel"}})
	if err != nil {
		return "", "", err
	}
	lines := strings.Split(strings.TrimSuffix(string(res.Stdout.Data), "\n"), "\n")
	if len(lines) != 2 {
		return "", "", fmt.Errorf("git rev-parse in %s: unexpected output %q", r.dir, res.Stdout.Data)
	}
	top = path.Join(r.dir, lines[0])
	if top == ".." || strings.HasPrefix(top, "../") {
		return "", "", &execbox.FieldError{Field: "dir", Problem: "the repository's top level is outside the workspace", Kind: execbox.ErrPermission}
	}
	real := path.Clean(lines[1])
	switch {
	case top == ".":
		realWS = real
	case strings.HasSuffix(real, "/"+top):
		realWS = strings.TrimSuffix(real, "/"+top)
	}
	return top, realWS, nil
}

func (r *Repo) git(ctx context.Context, cl call) (execbox.Result, error) {
	cl.dir = r.dir
	cl.config = append(cl.config, r.cfg...)
	return r.c.git(ctx, cl)
}
