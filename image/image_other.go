//go:build !linux

package image

import (
	"fmt"
	"runtime"

	"github.com/execbox/execbox"
)

// Store is Linux's only: elsewhere Open refuses.
type Store struct{}

// Options are Linux's only (see the Linux documentation).
type Options struct{}

// Open reports that image stores need Linux.
func Open(Options) (*Store, error) {
	return nil, fmt.Errorf("image store on %s: needs Linux: %w", runtime.GOOS, execbox.ErrUnsupported)
}
