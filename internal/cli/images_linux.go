package cli

import (
	"log/slog"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/image"
	"github.com/execbox/execbox/internal/config"
	"github.com/execbox/execbox/internal/imageapi"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/runtimes/sandbox"
	"github.com/execbox/execbox/runtimes/sandbox/sandboximage"
)

// imageOptions are the options of the configured image store: the
// sandbox runtime's, whose image_dir and image_max_size are images.dir
// and images.max_size when those are set (config.RuntimeOptions), and
// may also be set in its own section. Settings of the sandbox runtime
// that do not decode are its own problem: then images.* alone count.
func imageOptions(cfg *config.Config, logger *slog.Logger) image.Options {
	var o sandbox.Options
	if execbox.DecodeSettings(sandbox.Name, cfg.RuntimeOptions(sandbox.Name, logger).Settings, &o) != nil {
		o.ImageDir, o.ImageMaxSize = cfg.Images.Dir, sandbox.Size(cfg.Images.MaxSize)
	}
	return image.Options{Dir: o.ImageDir, MaxSize: int64(o.ImageMaxSize), Logger: logger}
}

// localImages is the configured store of this machine, opened when first
// used.
func localImages(cfg *config.Config, logger *slog.Logger) (server.Images, error) {
	return imageapi.Lazy(imageOptions(cfg, logger)), nil
}

// serveImages returns the store execbox serve manages under /v1/images,
// and the runtime to serve: rt itself, or, for the sandbox runtime, an
// equal one that makes its sandboxes from that same *image.Store, so
// that a pull through the API and a sandbox's pull of one reference are
// done once, and the server sees in-use marks and LastUsed as the
// runtime makes them.
//
// The registry cannot hand a *image.Store to the sandbox's factory (its
// settings are JSON), so the runtime is made again with sandbox.New from
// the same settings, which its factory already validated when rt was
// opened (factories have no side effects; rt made no sandbox of its own
// that lives on). With another runtime the store is opened only when a
// request needs it: such a server makes no cache directory for nothing.
// A store that cannot be opened is reported and left to the requests
// (and sandboxes) that need it, rather than stopping the server.
func serveImages(s *stdio, cfg *config.Config, logger *slog.Logger, rt execbox.Runtime) (execbox.Runtime, server.Images, error) {
	if _, ok := rt.(*sandbox.Runtime); !ok {
		return rt, imageapi.Lazy(imageOptions(cfg, logger)), nil
	}
	var o sandbox.Options
	if err := execbox.DecodeSettings(sandbox.Name, cfg.RuntimeOptions(sandbox.Name, logger).Settings, &o); err != nil {
		return nil, nil, err
	}
	opts := image.Options{Dir: o.ImageDir, MaxSize: int64(o.ImageMaxSize), Logger: logger}
	st, err := image.Open(opts)
	if err != nil {
		s.warn("image store: %v (pulling images and sandboxes made from images will fail)", err)
		return rt, imageapi.Lazy(opts), nil
	}
	o.Logger, o.Images = logger, sandboximage.New(st)
	return sandbox.New(o), imageapi.New(st), nil
}
