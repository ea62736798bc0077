//go:build linux

package image

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// List describes the images of the store, one Info per image ID (with
// every reference to it), least recently used first.
func (s *Store) List() ([]Info, error) {
	recs, err := s.records()
	if err != nil {
		return nil, err
	}
	byID := map[string]*Info{}
	var out []*Info
	for _, r := range recs {
		in := byID[r.ID]
		if in == nil {
			in = &Info{ID: r.ID, ChainID: "sha256:" + r.ChainID, Size: r.Size}
			in.LastUsed, in.InUse = s.usage(r.ChainID)
			byID[r.ID] = in
			out = append(out, in)
		}
		in.Refs = append(in.Refs, r.Ref)
	}
	infos := make([]Info, len(out))
	for i, in := range out {
		slices.Sort(in.Refs)
		infos[i] = *in
	}
	slices.SortFunc(infos, func(a, b Info) int { return a.LastUsed.Compare(b.LastUsed) })
	return infos, nil
}

// usage is the last use of the root chain and whether it is in use.
func (s *Store) usage(chain string) (last time.Time, inUse bool) {
	if fi, err := os.Stat(filepath.Join(s.rootDir(chain), "lock")); err == nil {
		last = fi.ModTime()
	}
	return last, s.inUse(chain)
}

// Remove removes the reference ref from the store, and the root it
// names unless another cached reference shares it. It refuses, with an
// error matching ErrInUse (an execbox.ErrUnavailable), while a sandbox
// uses the root (see Use); a reference not in the store is
// execbox.ErrNotFound.
func (s *Store) Remove(ref string) error {
	src, err := parseRef(ref)
	if err != nil {
		return err
	}
	r, err := s.readRecord(src.key)
	if errors.Is(err, fs.ErrNotExist) {
		return notFound(src.key, "not in the store")
	}
	if err != nil {
		return err
	}
	unlock, err := lockCtx(context.Background(), s.path(locksDir, r.ChainID+".lock"))
	if err != nil {
		return err
	}
	defer unlock()
	release, err := s.lockRoot(r.ChainID)
	if errors.Is(err, errLocked) {
		return fmt.Errorf("image %s: %w", src.key, ErrInUse)
	}
	if err == nil {
		defer release()
	}
	if err := os.Remove(s.refFile(src.key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	recs, err := s.records()
	if err != nil {
		return err
	}
	for _, o := range recs {
		if o.ChainID == r.ChainID {
			return nil // the root stays for the other reference
		}
	}
	return s.removeRoot(r.ChainID)
}

// removeRoot moves the root chain out of roots/ (at once: a root is
// either whole or gone) and deletes it. The caller holds its locks.
func (s *Store) removeRoot(chain string) error {
	trash, err := os.MkdirTemp(s.path(tmpDir), "trash-*")
	if err != nil {
		return err
	}
	defer removeAll(trash)
	err = os.Rename(s.rootDir(chain), filepath.Join(trash, chain))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// Prune removes images that no sandbox uses, least recently used first,
// until the roots of the store add up to at most maxSize bytes. It
// returns what it removed.
func (s *Store) Prune(ctx context.Context, maxSize int64) ([]Info, error) {
	return s.prune(ctx, maxSize, "")
}

// prune is Prune, sparing the root of the chain ID keep.
func (s *Store) prune(ctx context.Context, maxSize int64, keep string) ([]Info, error) {
	return s.pruneWith(ctx, maxSize, keep, true)
}

// pruneWith is prune; wait says whether to wait for the lock of a root
// being unpacked or removed (else it is skipped).
func (s *Store) pruneWith(ctx context.Context, maxSize int64, keep string, wait bool) ([]Info, error) {
	infos, err := s.List() // least recently used first
	if err != nil {
		return nil, err
	}
	roots := map[string][]Info{} // by chain ID: images sharing a root go together
	var order []string
	var total int64
	for _, in := range infos {
		if roots[in.ChainID] == nil {
			order = append(order, in.ChainID)
			total += in.Size
		}
		roots[in.ChainID] = append(roots[in.ChainID], in)
	}
	var removed []Info
	for _, chain := range order {
		if total <= maxSize {
			break
		}
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		if chain == keep {
			continue
		}
		ok, err := s.pruneRoot(ctx, strings.TrimPrefix(chain, "sha256:"), wait)
		if err != nil {
			return removed, err
		}
		if ok {
			total -= roots[chain][0].Size
			removed = append(removed, roots[chain]...)
			s.log.Info("pruned", "chain_id", chain, "size", roots[chain][0].Size)
		}
	}
	return removed, nil
}

// pruneRoot removes the root chain and every reference to it, unless it
// is in use, or wait is false and its lock is held (then it reports
// false).
func (s *Store) pruneRoot(ctx context.Context, chain string, wait bool) (bool, error) {
	lock := s.path(locksDir, chain+".lock")
	var unlock func()
	var err error
	if wait {
		unlock, err = lockCtx(ctx, lock)
	} else if unlock, err = tryLock(lock); errors.Is(err, errLocked) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer unlock()
	release, err := s.lockRoot(chain)
	if errors.Is(err, errLocked) {
		return false, nil
	}
	if err == nil {
		defer release()
	}
	recs, err := s.records()
	if err != nil {
		return false, err
	}
	for _, r := range recs {
		if r.ChainID == chain {
			if err := os.Remove(s.refFile(r.Ref)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return false, err
			}
		}
	}
	return true, s.removeRoot(chain)
}
