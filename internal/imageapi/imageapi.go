//go:build linux

// Package imageapi is an image store (package image) in the terms of
// package api: what execbox serve's /v1/images routes manage
// (internal/server.Images) and what execbox image acts on locally. It
// lives apart from internal/server so that the agent, which links the
// server's handlers, never links package image and its registry client.
package imageapi

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/image"
)

// Store is an image.Store answering api types. Its methods are safe for
// concurrent use. Errors carry execbox kinds, as the image package's do;
// a bad reference is an invalid argument naming the field "ref".
type Store struct {
	opts image.Options

	mu sync.Mutex
	st *image.Store // nil until opened
}

// New returns st in api terms.
func New(st *image.Store) *Store { return &Store{st: st} }

// Lazy returns the store of opts, opened (its directory created) at the
// first call that needs it, so that a program that never manages images
// makes no cache directory. A failure to open is returned by that call
// and tried again by the next.
func Lazy(opts image.Options) *Store { return &Store{opts: opts} }

// Image returns the underlying store, opening it if needed.
func (s *Store) Image() (*image.Store, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.st == nil {
		st, err := image.Open(s.opts)
		if err != nil {
			return nil, fmt.Errorf("image store: %w", err)
		}
		s.st = st
	}
	return s.st, nil
}

// List lists the store's references, least recently used first; the
// references to one image are listed one after the other.
func (s *Store) List(ctx context.Context) ([]api.Image, error) {
	st, err := s.Image()
	if err != nil {
		return nil, err
	}
	infos, err := st.List()
	if err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}
	out := make([]api.Image, 0, len(infos))
	for _, in := range infos {
		for _, ref := range in.Refs {
			img := fromInfo(in, ref)
			if got, err := st.Get(ref); err == nil {
				img.Digest = got.Digest
			}
			out = append(out, img)
		}
	}
	return out, nil
}

// Pull pulls ref again (image.Store.Pull) and describes it.
func (s *Store) Pull(ctx context.Context, ref string) (api.Image, error) {
	st, err := s.Image()
	if err != nil {
		return api.Image{}, err
	}
	img, err := st.Pull(ctx, ref)
	if err != nil {
		return api.Image{}, refField(err)
	}
	return s.describe(st, img), nil
}

// Remove removes ref from the store (image.Store.Remove) and returns what
// it was. An image a sandbox uses is refused with an error matching
// image.ErrInUse and execbox.ErrUnavailable.
func (s *Store) Remove(ctx context.Context, ref string) (api.Image, error) {
	st, err := s.Image()
	if err != nil {
		return api.Image{}, err
	}
	img, err := st.Get(ref)
	if err != nil {
		return api.Image{}, refField(err)
	}
	desc := s.describe(st, img)
	if err := st.Remove(ref); err != nil {
		if errors.Is(err, image.ErrInUse) {
			return api.Image{}, fmt.Errorf("%w: a sandbox uses it (close the sandbox first)", err)
		}
		return api.Image{}, refField(err)
	}
	desc.InUse = false
	return desc, nil
}

// Prune removes the least recently used images that no sandbox uses
// until the store holds at most maxSize bytes (image.Store.Prune).
func (s *Store) Prune(ctx context.Context, maxSize int64) (api.PruneImagesResponse, error) {
	if maxSize < 0 {
		return api.PruneImagesResponse{}, execbox.Invalid("max_size", "must not be negative")
	}
	st, err := s.Image()
	if err != nil {
		return api.PruneImagesResponse{}, err
	}
	infos, err := st.Prune(ctx, maxSize)
	out := api.PruneImagesResponse{Removed: []api.Image{}}
	freed := map[string]bool{}
	for _, in := range infos {
		if !freed[in.ChainID] {
			freed[in.ChainID] = true
			out.Freed += in.Size
		}
		for _, ref := range in.Refs {
			out.Removed = append(out.Removed, fromInfo(in, ref))
		}
	}
	return out, err
}

// describe is img with its use, as List tells it.
func (s *Store) describe(st *image.Store, img *image.Image) api.Image {
	out := api.Image{Ref: img.Ref, ID: img.ID, Digest: img.Digest, ChainID: img.ChainID, Size: img.Size}
	infos, err := st.List()
	if err != nil {
		return out
	}
	for _, in := range infos {
		if in.ChainID == img.ChainID {
			out.LastUsed, out.InUse = in.LastUsed, in.InUse
		}
	}
	return out
}

func fromInfo(in image.Info, ref string) api.Image {
	return api.Image{Ref: ref, ID: in.ID, ChainID: in.ChainID, Size: in.Size, LastUsed: in.LastUsed, InUse: in.InUse}
}

// refField renames the field of a bad reference, "image" in package
// image (Spec.Image's name), to "ref", the field of the requests here.
func refField(err error) error {
	if fe, ok := err.(*execbox.FieldError); ok && fe.Field == "image" {
		return &execbox.FieldError{Field: "ref", Problem: fe.Problem, Kind: fe.Kind}
	}
	return err
}
