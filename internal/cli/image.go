package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/config"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/runtimes/remote"
)

var imageCommand = &command{
	name:    "image",
	summary: "pull, list, remove and prune the images sandboxes are made from",
	args:    "OPERATION [flags] [arguments]",
	help: `Image manages the image store: the OCI images, pulled and unpacked, that
sandboxes are made from (--image, the image key). The store is the
directory images.dir (--images-dir; default /var/lib/execbox/images as root,
else ~/.cache/execbox/images), shared by every execbox of this machine;
images.max_size (--images-max-size) bounds it after each pull. With
--runtime remote (runtimes.remote in execbox.yaml) it is the store of the
execbox serve at runtimes.remote.url, on the server's machine.

A reference is a registry's (python:3.12-slim, localhost:5000/team/env:1,
reg/x@sha256:...; Docker Hub by default) or a path: one starting with /,
./ or ../, an OCI image layout directory (DIR:tag picks a tag) or a
'docker save' tarball. A server pulls paths of its own machine only with
--allow-host-paths.

Operations:
  pull REF...         pull (always resolving again), print ID, size, reference
  ls                  list: reference, short ID, size, last use, in use (--json)
  rm REF...           remove; an image a sandbox uses is refused
  prune               remove the least recently used images no sandbox uses
                      until the store holds at most --max-size (default 0: all)

'execbox image OPERATION -h' shows an operation's flags; --json prints what
the HTTP API answers (api.Image, api.ImageList, api.PruneImagesResponse).

Exit codes: 0 on success, 2 for a usage error (a bad reference or flag),
125 when an operation failed (not found, in use, unreachable registry...),
after trying every REF.`,
	run: runImage,
}

// imageOp is one operation of `execbox image`.
type imageOp struct {
	name, args, help string
	// flags adds the operation's own flags and returns what runs it.
	flags func(fs *flag.FlagSet) func(ctx context.Context, r *imageRun, args []string) error
}

// imageRun is an operation in progress.
type imageRun struct {
	s      *stdio
	images server.Images
	json   bool
}

func runImage(ctx context.Context, c *command, s *stdio, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		w, code := s.err, ExitUsage
		if len(args) > 0 {
			w, code = s.out, 0
		}
		printCommandUsage(w, c, newFlagSet(c))
		return code
	}
	var op *imageOp
	for _, o := range imageOps {
		if o.name == args[0] {
			op = o
		}
	}
	if op == nil {
		return s.fail(ExitUsage, fmt.Errorf("image: unknown operation %q (see 'execbox image -h')", args[0]))
	}
	oc := &command{name: "image " + op.name, args: op.args, help: op.help}
	fs := newFlagSet(oc)
	var cf config.Flags
	cf.Register(fs, "runtime", "images.dir", "images.max_size", "log.level", "log.format")
	r := &imageRun{s: s}
	fs.BoolVar(&r.json, "json", false, "print what the HTTP API answers, as JSON")
	do := op.flags(fs)
	if code, done := s.parse(oc, fs, args[1:]); done {
		return code
	}
	cfg, code, ok := s.loadConfig(&cf)
	if !ok {
		return code
	}
	var err error
	if r.images, err = openImages(ctx, cfg, s); err != nil {
		return s.fail(errorCode(err), cfg.Annotate(err))
	}
	err = do(ctx, r, fs.Args())
	switch {
	case err == nil:
		return 0
	case ctx.Err() != nil:
		return interrupted(ctx)
	}
	return s.fail(imageErrorCode(err), err)
}

// openImages returns the store the configuration names: the server's
// with runtime remote, else this machine's.
func openImages(ctx context.Context, cfg *config.Config, s *stdio) (server.Images, error) {
	logger := cfg.Logger(s.err)
	if cfg.Runtime != remote.Name {
		return localImages(cfg, logger)
	}
	rt, err := cfg.OpenRuntime(ctx, logger, s.err)
	if err != nil {
		return nil, err
	}
	rr, ok := rt.(*remote.Runtime)
	if !ok {
		return nil, fmt.Errorf("runtime %s: not the remote runtime", rt.Name())
	}
	return remoteImages{rr.Client()}, nil
}

// imageErrorCode is the exit code of a failed operation: every error of
// a bad argument makes it a usage error.
func imageErrorCode(err error) int {
	for _, e := range leaves(err) {
		if errorCode(e) != ExitUsage {
			return ExitFailure
		}
	}
	return ExitUsage
}

// eachRef calls fn for every ref, going on after a failure, and returns
// every failure.
func eachRef(refs []string, fn func(ref string) error) error {
	if len(refs) == 0 {
		return execbox.Invalid("ref", "at least one reference is required")
	}
	var errs []error
	for _, ref := range refs {
		if strings.HasPrefix(ref, "-") {
			errs = append(errs, execbox.Invalid("ref", "%q looks like a flag (flags go before references)", ref))
			continue
		}
		if err := fn(ref); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

var imageOps = []*imageOp{
	{name: "pull", args: "[flags] REF...", help: "Pull pulls each REF, resolving it again even if cached (a newer image behind a tag is fetched), and prints its ID, size and resolved reference.",
		flags: func(fs *flag.FlagSet) func(context.Context, *imageRun, []string) error {
			return func(ctx context.Context, r *imageRun, refs []string) error {
				var pulled []api.Image
				tw := tabwriter.NewWriter(r.s.out, 0, 0, 2, ' ', 0)
				err := eachRef(refs, func(ref string) error {
					img, err := r.images.Pull(ctx, ref)
					if err != nil {
						return err
					}
					pulled = append(pulled, img)
					if !r.json {
						fmt.Fprintf(tw, "%s\t%s\t%s\n", img.ID, humanSize(img.Size), img.Ref)
						tw.Flush()
					}
					return nil
				})
				return r.finish(err, api.ImageList{Images: nonNil(pulled)})
			}
		}},
	{name: "ls", args: "[flags]", help: "Ls lists the images of the store, least recently used first: reference, short ID, size (images sharing their layers share one root), last use and whether a sandbox uses it.",
		flags: func(fs *flag.FlagSet) func(context.Context, *imageRun, []string) error {
			return func(ctx context.Context, r *imageRun, args []string) error {
				if err := maxArgs("image ls", args, 0); err != nil {
					return err
				}
				list, err := r.images.List(ctx)
				if err != nil {
					return err
				}
				if r.json {
					return printJSON(r.s.out, api.ImageList{Images: nonNil(list)})
				}
				printImages(r.s.out, list, time.Now())
				return nil
			}
		}},
	{name: "rm", args: "[flags] REF...", help: "Rm removes each REF from the store, and its unpacked root unless another reference shares it. An image a sandbox uses is refused.",
		flags: func(fs *flag.FlagSet) func(context.Context, *imageRun, []string) error {
			return func(ctx context.Context, r *imageRun, refs []string) error {
				var removed []api.Image
				err := eachRef(refs, func(ref string) error {
					img, err := r.images.Remove(ctx, ref)
					if err != nil {
						return err
					}
					removed = append(removed, img)
					if !r.json {
						fmt.Fprintln(r.s.out, img.Ref)
					}
					return nil
				})
				return r.finish(err, api.ImageList{Images: nonNil(removed)})
			}
		}},
	{name: "prune", args: "[flags]", help: "Prune removes the least recently used images that no sandbox uses until the store holds at most --max-size bytes, and prints what it removed.",
		flags: func(fs *flag.FlagSet) func(context.Context, *imageRun, []string) error {
			maxSize := fs.String("max-size", "0", "`SIZE` to keep at most (\"10GiB\"); 0 removes every image not in use")
			return func(ctx context.Context, r *imageRun, args []string) error {
				if err := maxArgs("image prune", args, 0); err != nil {
					return err
				}
				n, err := config.ParseSize(*maxSize)
				if err != nil {
					return &config.SourceError{Source: "--max-size", Err: execbox.Invalid("max_size", "%v", err)}
				}
				res, err := r.images.Prune(ctx, n)
				if err != nil {
					return err
				}
				if r.json {
					return printJSON(r.s.out, res)
				}
				tw := tabwriter.NewWriter(r.s.out, 0, 0, 2, ' ', 0)
				for _, img := range res.Removed {
					fmt.Fprintf(tw, "removed\t%s\t%s\t%s\n", img.Ref, shortID(img.ID), humanSize(img.Size))
				}
				tw.Flush()
				fmt.Fprintf(r.s.out, "freed %s\n", humanSize(res.Freed))
				return nil
			}
		}},
}

// finish prints v as JSON with --json, even after some references
// failed (it lists those that did not), and returns err.
func (r *imageRun) finish(err error, v any) error {
	if r.json {
		if perr := printJSON(r.s.out, v); perr != nil {
			return errors.Join(err, fmt.Errorf("stdout: %w", perr))
		}
	}
	return err
}

func nonNil(l []api.Image) []api.Image {
	if l == nil {
		return []api.Image{}
	}
	return l
}

// printImages prints the table of ls.
func printImages(w io.Writer, list []api.Image, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "REF\tID\tSIZE\tLAST USED\tIN USE")
	for _, img := range list {
		inUse := "no"
		if img.InUse {
			inUse = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", img.Ref, shortID(img.ID), humanSize(img.Size), ago(img.LastUsed, now), inUse)
	}
	tw.Flush()
}

// shortID is the first 12 hex digits of a "sha256:..." ID.
func shortID(id string) string {
	_, hex, ok := strings.Cut(id, ":")
	if !ok {
		hex = id
	}
	return hex[:min(12, len(hex))]
}

// humanSize prints n bytes in a binary unit with one decimal: "1.5MiB".
func humanSize(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%dB", n)
	}
	v, unit := float64(n)/1024, 0
	for v >= 1024 && unit < 5 {
		v, unit = v/1024, unit+1
	}
	return fmt.Sprintf("%.1f%ciB", v, "KMGTPE"[unit])
}

// ago says how long before now t was, in its largest unit.
func ago(t, now time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := now.Sub(t)
	plural := func(n int, unit string) string {
		if n == 1 {
			return "1 " + unit + " ago"
		}
		return fmt.Sprintf("%d %ss ago", n, unit)
	}
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return plural(int(d/time.Minute), "minute")
	case d < 48*time.Hour:
		return plural(int(d/time.Hour), "hour")
	}
	return plural(int(d/(24*time.Hour)), "day")
}

// remoteImages is the store of an execbox server, through its client.
type remoteImages struct{ c *client.Client }

func (r remoteImages) List(ctx context.Context) ([]api.Image, error) { return r.c.Images(ctx) }
func (r remoteImages) Pull(ctx context.Context, ref string) (api.Image, error) {
	return r.c.PullImage(ctx, ref)
}
func (r remoteImages) Remove(ctx context.Context, ref string) (api.Image, error) {
	return r.c.RemoveImage(ctx, ref)
}
func (r remoteImages) Prune(ctx context.Context, maxSize int64) (api.PruneImagesResponse, error) {
	return r.c.PruneImages(ctx, api.PruneImagesRequest{MaxSize: maxSize})
}
