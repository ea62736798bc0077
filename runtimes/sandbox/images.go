package sandbox

import (
	"context"
	"log/slog"

	"github.com/execbox/execbox"
)

// Images is an image store as the sandbox runtime uses it (Spec.Image).
// Package runtimes/sandbox/sandboximage makes one of package image's
// Store. The runtime holds no registry client of its own: a program that
// links it is what runs inside every boundary (the init and agent are
// that program re-executed, each start paying its packages'
// initialisation), and one without images stays small.
type Images interface {
	// Root makes ref's image present (pulled and unpacked unless
	// cached) and returns its root, in use until its Release.
	Root(ctx context.Context, ref string) (*ImageRoot, error)
	// Commit makes a new image of root's layers and the changes ch, and
	// writes it to dest (execbox.ImageCommitter).
	Commit(ctx context.Context, root *ImageRoot, ch ImageChanges, dest string) (execbox.CommittedImage, error)
}

// ImageRoot is an image's unpacked root, in use by a sandbox.
type ImageRoot struct {
	Ref string // the reference as resolved, for messages
	// Dir is the root directory: shared by every sandbox of the image,
	// never written (the lower layer of each sandbox's overlay).
	Dir string
	// Env and User are the image's configuration's: the base of every
	// command's environment, and the default user ("name", "uid",
	// "name:group", "uid:gid"; "" is root).
	Env  []string
	User string
	// Release ends the use; the store may then remove the root. The
	// runtime calls it once.
	Release func()
	// Source is the store's own description of the image, for Commit.
	Source any
}

// ImageChanges are what a sandbox changed over its image's root, as
// overlayfs keeps them.
type ImageChanges struct {
	// Upper is the overlay's upper directory.
	Upper string
	// IDBase is the host uid and gid of the sandbox's uid 0: Upper's
	// host id IDBase+n is the image's n.
	IDBase uint32
}

// OpenImages opens the image store of Options.ImageDir and ImageMaxSize
// when a sandbox first asks for an image and Options.Images is nil.
// Package sandboximage sets it (runtimes/all imports it); while nil, a
// runtime without Options.Images refuses images.
var OpenImages func(dir string, maxSize int64, log *slog.Logger) (Images, error)
