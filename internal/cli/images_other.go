//go:build !linux

package cli

import (
	"fmt"
	"log/slog"
	"runtime"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/config"
	"github.com/execbox/execbox/internal/server"
)

// localImages: the image store is Linux-only (package image); elsewhere
// execbox image works against a server only (--runtime remote).
func localImages(cfg *config.Config, logger *slog.Logger) (server.Images, error) {
	return nil, fmt.Errorf("the image store works on Linux only (this is %s); use --runtime remote: %w", runtime.GOOS, execbox.ErrUnsupported)
}

// serveImages: a server here has no image store; its /v1/images routes
// answer unsupported.
func serveImages(s *stdio, cfg *config.Config, logger *slog.Logger, rt execbox.Runtime) (execbox.Runtime, server.Images, error) {
	return rt, nil, nil
}
