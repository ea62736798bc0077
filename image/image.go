//go:build linux

package image

import (
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Config is what a sandbox takes from an image's configuration.
type Config struct {
	Env        []string `json:"env,omitempty"`         // KEY=value
	WorkingDir string   `json:"working_dir,omitempty"` // absolute; "" is /
	User       string   `json:"user,omitempty"`        // user[:group], names or ids
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
}

func configOf(cf *v1.ConfigFile) Config {
	c := cf.Config
	return Config{Env: c.Env, WorkingDir: c.WorkingDir, User: c.User, Entrypoint: c.Entrypoint, Cmd: c.Cmd}
}

// Image is an image of the store, unpacked.
type Image struct {
	// Ref is the reference as resolved: name.Reference.Name() for a
	// registry's ("python:3.12" is "index.docker.io/library/python:3.12"),
	// the absolute path (with its suffix) for a local one.
	Ref string
	// ID is "sha256:..." of the image's configuration.
	ID string
	// Digest is the "sha256:..." of the manifest, if known (not for a
	// `docker save` tarball, which has none).
	Digest string
	// ChainID is the OCI chain ID of the image's layers: images with the
	// same layers share one root. (Added to the API: Use finds the root's
	// lock by it, never by a path a caller could forge.)
	ChainID string
	// RootFS is the absolute path of the unpacked, flattened root
	// directory. It is shared by every user of the image and of images
	// with the same layers: read-only, never to be written (mount it as
	// an overlay's lower layer, or read-only).
	RootFS string
	// Config is the image's configuration.
	Config Config
	// Size is the bytes the unpacked root takes on disk (blocks of every entry, each hard
	// link counted once).
	Size int64
}

// Info describes an image of the store, for List, Prune and Remove.
type Info struct {
	Refs     []string  // the references pulled that resolved to it, sorted
	ID       string    // as Image.ID
	ChainID  string    // as Image.ChainID
	Size     int64     // as Image.Size
	LastUsed time.Time // last pull, Ensure-then-Use or Use of its root
	InUse    bool      // a sandbox holds its root (see Store.Use)
}
