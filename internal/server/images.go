package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
)

// Images is the image store a Server manages under /v1/images: the one
// its runtimes make sandboxes from (execbox serve gives the sandbox
// runtime and the server one store; internal/imageapi is its
// implementation over package image). The server only decodes, checks
// and answers: it never links package image, which the agent, linking
// these handlers, must not carry. Errors carry execbox kinds.
type Images interface {
	// List lists the store's references, least recently used first.
	List(ctx context.Context) ([]api.Image, error)
	// Pull resolves ref again and unpacks it unless cached.
	Pull(ctx context.Context, ref string) (api.Image, error)
	// Remove removes ref, refusing (ErrUnavailable) while a sandbox
	// uses it, and returns what it was.
	Remove(ctx context.Context, ref string) (api.Image, error)
	// Prune removes the least recently used images no sandbox uses until
	// the store holds at most maxSize bytes.
	Prune(ctx context.Context, maxSize int64) (api.PruneImagesResponse, error)
}

func (s *Server) registerImageRoutes() {
	m := s.mux
	m.HandleFunc("GET /v1/images", s.listImages)
	m.HandleFunc("POST /v1/images/pull", s.pullImage)
	m.HandleFunc("POST /v1/images/remove", s.removeImage)
	m.HandleFunc("POST /v1/images/prune", s.pruneImages)
}

// images returns the store, or an unsupported error for a server
// without one.
func (s *Server) images() (Images, error) {
	if s.opts.Images == nil {
		return nil, fmt.Errorf("this server manages no image store: %w", execbox.ErrUnsupported)
	}
	return s.opts.Images, nil
}

func (s *Server) listImages(w http.ResponseWriter, r *http.Request) {
	st, err := s.images()
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	list, err := st.List(r.Context())
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if list == nil {
		list = []api.Image{}
	}
	writeJSON(w, http.StatusOK, api.ImageList{Images: list})
}

// pullImage pulls: POST /v1/images/pull {"ref"}. A reference that is a
// path of this machine needs Options.AllowHostPaths, as a spec's
// workspace does: reading a layout or tarball from it reads the host. It
// must be absolute.
func (s *Server) pullImage(w http.ResponseWriter, r *http.Request) {
	var req api.PullImageRequest
	st, err := s.images()
	if err == nil {
		err = readJSON(r, s.opts.MaxJSONBody, &req, true)
	}
	if err == nil {
		err = checkRef(req.Ref)
	}
	if err == nil {
		err = s.checkHostPath("ref", req.Ref)
	}
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	img, err := st.Pull(r.Context(), req.Ref)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	s.log.Info("pulled image", "ref", img.Ref, "id", img.ID, "size", img.Size)
	writeJSON(w, http.StatusOK, img)
}

// removeImage removes: POST /v1/images/remove {"ref"}. Not DELETE
// /v1/images/{ref}: references hold "/", and local ones "..", "//" and
// a leading "/", which routers and proxies normalise in a URL path (see
// api/doc.go on file paths); a body carries them unchanged.
func (s *Server) removeImage(w http.ResponseWriter, r *http.Request) {
	var req api.RemoveImageRequest
	st, err := s.images()
	if err == nil {
		err = readJSON(r, s.opts.MaxJSONBody, &req, true)
	}
	if err == nil {
		err = checkRef(req.Ref)
	}
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	img, err := st.Remove(r.Context(), req.Ref)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	s.log.Info("removed image", "ref", img.Ref, "id", img.ID)
	writeJSON(w, http.StatusOK, img)
}

// pruneImages prunes: POST /v1/images/prune {"max_size"}; no body is
// max_size 0.
func (s *Server) pruneImages(w http.ResponseWriter, r *http.Request) {
	var req api.PruneImagesRequest
	st, err := s.images()
	if err == nil {
		err = readJSON(r, s.opts.MaxJSONBody, &req, false)
	}
	if err == nil && req.MaxSize < 0 {
		err = wireInvalid("max_size", "must not be negative")
	}
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	res, err := st.Prune(r.Context(), req.MaxSize)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	if len(res.Removed) > 0 {
		s.log.Info("pruned images", "count", len(res.Removed), "freed", res.Freed)
	}
	writeJSON(w, http.StatusOK, res)
}

func checkRef(ref string) error {
	if ref == "" {
		return wireInvalid("ref", "is required")
	}
	return nil
}

// checkHostPath refuses ref, the request's field, when it is a path of
// this machine (localRef) and the server does not allow host paths, or
// is not absolute: relative to the server's working directory, which the
// client knows nothing of.
func (s *Server) checkHostPath(field, ref string) error {
	switch {
	case !localRef(ref):
		return nil
	case !s.opts.AllowHostPaths:
		return &execbox.FieldError{Field: field, Kind: execbox.ErrPermission,
			Problem: hostPathsRefused}
	case !strings.HasPrefix(ref, "/"):
		return wireInvalid(field, "%q: a path on the server's host must be absolute", ref)
	}
	return nil
}

// localRef reports whether ref names a path rather than a registry's
// image, by package image's rule: it starts with "/", "./" or "../", or
// is "." or "..".
func localRef(ref string) bool {
	return ref == "." || ref == ".." || strings.HasPrefix(ref, "/") ||
		strings.HasPrefix(ref, "./") || strings.HasPrefix(ref, "../")
}

// commit saves what a sandbox changed in its image's root as a new
// image: POST /v1/sandboxes/{id}/commit {"dest"}. A dest on this
// machine's disk needs Options.AllowHostPaths, as a pull's does.
func (s *Server) commit(w http.ResponseWriter, r *http.Request) {
	sb, err := s.lookup(r)
	var req api.CommitRequest
	if err == nil {
		err = readJSON(r, s.opts.MaxJSONBody, &req, true)
	}
	if err == nil && req.Dest == "" {
		err = wireInvalid("dest", "is required")
	}
	if err == nil {
		err = s.checkHostPath("dest", req.Dest)
	}
	var ic execbox.ImageCommitter
	if err == nil {
		var ok bool
		if ic, ok = sb.sb.(execbox.ImageCommitter); !ok {
			err = &execbox.FieldError{Field: "sandbox", Kind: execbox.ErrUnsupported,
				Problem: "the " + sb.runtime + " runtime cannot save a sandbox as an image"}
		}
	}
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	c, err := ic.CommitImage(r.Context(), req.Dest)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	s.log.Info("committed image", "sandbox", sb.info.ID, "ref", c.Ref, "digest", c.Digest)
	writeJSON(w, http.StatusOK, api.CommittedImage{Ref: c.Ref, ID: c.ID, Digest: c.Digest})
}
