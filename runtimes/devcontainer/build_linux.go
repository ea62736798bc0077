package devcontainer

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/client"

	"github.com/execbox/execbox"
)

// imageRepo is the repository of the images the runtime builds, tagged
// by a hash of what went into them.
const imageRepo = "execbox-devcontainer"

// maxDockerfile bounds a Dockerfile (and a .dockerignore).
const maxDockerfile = 1 << 20

// build builds the image of devcontainer.json's "build" through the
// Engine API (the classic builder: a tar of the context, no BuildKit
// session) and returns its ID. The image is tagged
// execbox-devcontainer:HASH, the hash of the Dockerfile, the build's
// settings and the context's file list (names, modes, sizes, times): an
// image of the same inputs is reused, not rebuilt.
//
// The context and the Dockerfile must be in the workspace folder (or in
// the directory of runtimes.devcontainer.config, or below
// allowed_mounts): commands can write devcontainer.json, and a context
// elsewhere would copy the host's files into an image they run in.
func (r *Runtime) build(ctx context.Context, dc *client.Client, cfg *config, p project) (string, error) {
	b := cfg.build
	roots := []string{p.real}
	if r.opts.Config != "" {
		roots = append(roots, filepath.Dir(r.opts.Config))
	}
	roots = append(roots, r.opts.AllowedMounts...)
	bad := func(key, format string, a ...any) error {
		return &execbox.FieldError{Field: fieldName(key), Kind: execbox.ErrPermission, Problem: fmt.Sprintf(format, a...) + " (in " + cfg.path + ")"}
	}
	resolve := func(key, p string) (string, error) {
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return "", &execbox.FieldError{Field: fieldName(key), Problem: fmt.Sprintf("%v (in %s)", err, cfg.path)}
		}
		for _, root := range roots {
			if rr, err := filepath.EvalSymlinks(root); err == nil {
				if _, ok := within(rr, real); ok {
					return real, nil
				}
			}
		}
		return "", bad(key, "%s is outside the workspace folder", p)
	}
	ctxDir, err := resolve("build.context", b.context)
	if err != nil {
		return "", err
	}
	dockerfile, err := resolve("build.dockerfile", b.dockerfile)
	if err != nil {
		return "", err
	}
	df, err := readBounded(dockerfile)
	if err != nil {
		return "", &execbox.FieldError{Field: fieldName("build.dockerfile"), Problem: fmt.Sprintf("%v (in %s)", err, cfg.path)}
	}
	if err := checkDockerfile(df); err != nil {
		return "", bad("build.dockerfile", "%s: %v", dockerfile, err)
	}
	root, err := os.OpenRoot(ctxDir)
	if err != nil {
		return "", &execbox.FieldError{Field: fieldName("build.context"), Problem: fmt.Sprintf("%v (in %s)", err, cfg.path)}
	}
	defer root.Close()
	// The Dockerfile's name in the context: where it is, or a name of
	// its own beside the context's files.
	dfName, inside := within(ctxDir, dockerfile)
	dfName = filepath.ToSlash(dfName)
	if !inside {
		dfName = ".execbox-Dockerfile"
	}
	var ig *ignorer
	if f, err := root.Open(".dockerignore"); err == nil {
		data, err := io.ReadAll(io.LimitReader(f, maxDockerfile))
		f.Close()
		if err == nil {
			ig, err = parseDockerignore(data)
		}
		if err != nil {
			return "", &execbox.FieldError{Field: fieldName("build.context"), Problem: fmt.Sprintf("%s/.dockerignore: %v", ctxDir, err)}
		}
	}
	files, err := contextFiles(root, ig, dfName)
	if err != nil {
		return "", fmt.Errorf("build context %s: %w", ctxDir, err)
	}

	h := sha256.New()
	fmt.Fprintf(h, "execbox-devcontainer build 1\x00%s\x00%d\x00", dfName, len(df))
	h.Write(df)
	fmt.Fprintf(h, "\x00target=%s\x00network=%s\x00cacheFrom=%q\x00", b.target, r.opts.Network, b.cacheFrom)
	args := make([]string, 0, len(b.args))
	for k, v := range b.args {
		args = append(args, k+"="+v)
	}
	slices.Sort(args)
	fmt.Fprintf(h, "args=%q\x00", args)
	for _, f := range files {
		f.hash(h)
	}
	tag := imageRepo + ":" + hex.EncodeToString(h.Sum(nil))[:16]
	if ins, err := dc.ImageInspect(ctx, tag); err == nil {
		r.log.Debug("reusing the built image", "tag", tag)
		return ins.ID, nil
	}

	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeContext(pw, root, files, inside, dfName, df)) }()
	defer pr.Close()
	buildArgs := map[string]*string{}
	for k, v := range b.args {
		buildArgs[k] = &v
	}
	res, err := dc.ImageBuild(ctx, pr, client.ImageBuildOptions{
		Tags:        []string{tag},
		Dockerfile:  dfName,
		BuildArgs:   buildArgs,
		Target:      b.target,
		CacheFrom:   b.cacheFrom,
		NetworkMode: r.opts.Network,
		Remove:      true,
		ForceRemove: true,
		Version:     build.BuilderV1,
		Labels:      map[string]string{labelRuntime: Name},
	})
	if err != nil {
		return "", fmt.Errorf("build %s: %w", dockerfile, engineErr(err))
	}
	defer res.Body.Close()
	if err := buildOutput(res.Body); err != nil {
		return "", &execbox.FieldError{Field: fieldName("build"), Problem: fmt.Sprintf("building %s failed: %v (in %s)", dockerfile, err, cfg.path)}
	}
	ins, err := dc.ImageInspect(ctx, tag)
	if err != nil {
		return "", fmt.Errorf("the image built from %s: %w", dockerfile, engineErr(err))
	}
	r.log.Info("built the devcontainer's image", "tag", tag, "dockerfile", dockerfile)
	return ins.ID, nil
}

// buildOutput reads the build's message stream to its end and returns
// its error, with the last lines of output before it.
func buildOutput(body io.Reader) error {
	dec := json.NewDecoder(body)
	var tail []string
	for {
		var m jsonstream.Message
		if err := dec.Decode(&m); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
		if m.Stream != "" {
			for _, l := range strings.Split(strings.TrimRight(m.Stream, "\n"), "\n") {
				tail = append(tail, l)
			}
			if len(tail) > 20 {
				tail = tail[len(tail)-20:]
			}
		}
		if m.Error != nil {
			msg := m.Error.Message
			if len(tail) > 0 {
				msg += "; the build's output ended with:\n" + strings.Join(tail, "\n")
			}
			return errors.New(msg)
		}
	}
}

// contextFile is a file of the build context sent to the engine.
type contextFile struct {
	name string // slash-separated, relative to the context
	info fs.FileInfo
	link string
}

func (f contextFile) hash(h hash.Hash) {
	fmt.Fprintf(h, "%s\x00%o\x00%d\x00%d\x00%s\x00", f.name, uint32(f.info.Mode()), f.info.Size(), f.info.ModTime().UnixNano(), f.link)
}

// contextFiles lists the context (directories, regular files, links; no
// devices, sockets or pipes) without what .dockerignore excludes, the
// Dockerfile and .dockerignore always in, as the docker CLI sends them.
func contextFiles(root *os.Root, ig *ignorer, dockerfile string) ([]contextFile, error) {
	var out []contextFile
	err := fs.WalkDir(root.FS(), ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name == "." {
			return nil
		}
		if name != dockerfile && name != ".dockerignore" && ig.ignored(name) {
			if d.IsDir() && !ig.negates {
				return fs.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		f := contextFile{name: name, info: info}
		switch t := info.Mode().Type(); {
		case t == fs.ModeSymlink:
			if f.link, err = root.Readlink(name); err != nil {
				return err
			}
		case t != 0 && !info.IsDir():
			return nil
		}
		out = append(out, f)
		return nil
	})
	return out, err
}

// writeContext writes the build context's tar: its files as root's, and
// the Dockerfile if it is not in it.
func writeContext(w io.Writer, root *os.Root, files []contextFile, dfInside bool, dfName string, df []byte) error {
	tw := tar.NewWriter(w)
	for _, f := range files {
		h, err := tar.FileInfoHeader(f.info, f.link)
		if err != nil {
			return err
		}
		h.Name, h.Uid, h.Gid, h.Uname, h.Gname = f.name, 0, 0, "", ""
		if f.info.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		src, err := root.Open(f.name)
		if err != nil {
			return err
		}
		_, err = io.CopyN(tw, src, h.Size)
		src.Close()
		if err != nil {
			return fmt.Errorf("%s: %w (it changed while being sent)", f.name, err)
		}
	}
	if !dfInside {
		if err := tw.WriteHeader(&tar.Header{Name: dfName, Mode: 0o644, Size: int64(len(df)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(df); err != nil {
			return err
		}
	}
	return tw.Close()
}

// readBounded reads a file of at most maxDockerfile bytes.
func readBounded(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxDockerfile+1))
	if err == nil && len(b) > maxDockerfile {
		err = fmt.Errorf("%s is larger than %d bytes", name, maxDockerfile)
	}
	return b, err
}
