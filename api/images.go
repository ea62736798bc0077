package api

import "time"

// Image is one reference of an image store (package image): what GET
// /v1/images lists and what pulling, removing and pruning answer, and
// what `execbox image ... --json` prints.
type Image struct {
	// Ref is the reference as the store resolved it:
	// "index.docker.io/library/python:3.12" for "python:3.12", an
	// absolute path (with its ":tag" or "@sha256:..." suffix) for an OCI
	// layout or a tarball.
	Ref string `json:"ref"`
	// ID is "sha256:..." of the image's configuration.
	ID string `json:"id"`
	// Digest is "sha256:..." of the manifest, when known (a `docker save`
	// tarball has none; a pruned image's is not kept).
	Digest string `json:"digest,omitempty"`
	// ChainID names the unpacked root: images with the same layers share
	// one, its size counted once, and are pruned together.
	ChainID string `json:"chain_id"`
	// Size is the bytes of the unpacked root.
	Size int64 `json:"size"`
	// LastUsed is the last pull of the image or the last sandbox made
	// from its root; absent if unknown.
	LastUsed time.Time `json:"last_used_at,omitzero"`
	// InUse says a sandbox uses the image's root: it cannot be removed
	// or pruned until the sandbox is closed.
	InUse bool `json:"in_use"`
}

// ImageList is the body of GET /v1/images: least recently used first.
type ImageList struct {
	Images []Image `json:"images"`
}

// PullImageRequest is the body of POST /v1/images/pull.
type PullImageRequest struct {
	// Ref is the reference to pull (required): a registry's, or a path on
	// the server's machine (which the server refuses unless it allows
	// host paths).
	Ref string `json:"ref"`
}

// RemoveImageRequest is the body of POST /v1/images/remove.
type RemoveImageRequest struct {
	// Ref is the reference to remove (required), as pulled or as listed.
	Ref string `json:"ref"`
}

// PruneImagesRequest is the body of POST /v1/images/prune.
type PruneImagesRequest struct {
	// MaxSize is the bytes of unpacked roots to keep at most: the least
	// recently used images no sandbox uses are removed until the rest
	// fit. 0 (the default) removes every image not in use.
	MaxSize int64 `json:"max_size,omitempty"`
}

// PruneImagesResponse is the answer of POST /v1/images/prune.
type PruneImagesResponse struct {
	// Removed lists the images removed, least recently used first.
	Removed []Image `json:"removed"`
	// Freed is the bytes of the roots removed.
	Freed int64 `json:"freed"`
}

// CommitRequest is the body of POST /v1/sandboxes/{id}/commit
// (execbox.ImageCommitter): what the sandbox changed in its image's root
// becomes a new image at Dest.
type CommitRequest struct {
	// Dest is a registry reference to push to, or an absolute path on
	// the server's machine of an OCI image layout directory, with an
	// optional ":tag" (which the server refuses unless it allows host
	// paths). Required.
	Dest string `json:"dest"`
}

// CommittedImage is the answer of POST /v1/sandboxes/{id}/commit.
type CommittedImage struct {
	Ref    string `json:"ref"`
	ID     string `json:"id"`
	Digest string `json:"digest"`
}
