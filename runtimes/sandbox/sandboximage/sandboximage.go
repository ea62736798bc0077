//go:build linux

package sandboximage

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/image"
	"github.com/execbox/execbox/runtimes/sandbox"
)

func init() {
	sandbox.OpenImages = func(dir string, maxSize int64, log *slog.Logger) (sandbox.Images, error) {
		st, err := image.Open(image.Options{Dir: dir, MaxSize: maxSize, Logger: log})
		if err != nil {
			return nil, err
		}
		return New(st), nil
	}
}

// New returns st as the sandbox runtime's image store.
func New(st *image.Store) sandbox.Images { return store{st} }

type store struct{ st *image.Store }

// Root ensures ref's image (image.Store.Ensure) and marks it in use
// (image.Store.Use).
func (s store) Root(ctx context.Context, ref string) (*sandbox.ImageRoot, error) {
	img, err := s.st.Ensure(ctx, ref)
	if err != nil {
		return nil, err
	}
	release, err := s.st.Use(img)
	if err != nil {
		return nil, err
	}
	return &sandbox.ImageRoot{
		Ref: img.Ref, Dir: img.RootFS, Env: img.Config.Env, User: img.Config.User,
		Release: release, Source: img,
	}, nil
}

// Commit is image.Store.Commit of root's image.
func (s store) Commit(ctx context.Context, root *sandbox.ImageRoot, ch sandbox.ImageChanges, dest string) (execbox.CommittedImage, error) {
	img, ok := root.Source.(*image.Image)
	if !ok {
		return execbox.CommittedImage{}, fmt.Errorf("sandboximage: a root of another store (%T)", root.Source)
	}
	return s.st.Commit(ctx, img, image.Changes{Upper: ch.Upper, IDBase: ch.IDBase}, dest)
}
