package imagetest

import (
	"context"
	"fmt"
	"io"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/moby/moby/client"
)

// DockerLoad loads img into the Docker engine of the environment
// ($DOCKER_HOST or the local socket) as tag, the way docker load does:
// the tests' way to give the engine an image without a registry.
func DockerLoad(ctx context.Context, img v1.Image, tag string) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return err
	}
	dc, err := client.New(client.FromEnv)
	if err != nil {
		return err
	}
	defer dc.Close()
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(tarball.Write(ref, img, pw)) }()
	res, err := dc.ImageLoad(ctx, pr)
	if err != nil {
		pr.CloseWithError(err)
		return fmt.Errorf("docker load %s: %w", tag, err)
	}
	defer res.Close()
	out, err := io.ReadAll(res)
	if err != nil {
		return fmt.Errorf("docker load %s: %w", tag, err)
	}
	if _, err := dc.ImageInspect(ctx, tag); err != nil {
		return fmt.Errorf("docker load %s: %w (the engine said %s)", tag, err, out)
	}
	return nil
}

// DockerRemove removes the image tag from the engine, if it is there.
func DockerRemove(ctx context.Context, tag string) error {
	dc, err := client.New(client.FromEnv)
	if err != nil {
		return err
	}
	defer dc.Close()
	_, err = dc.ImageRemove(ctx, tag, client.ImageRemoveOptions{Force: true, PruneChildren: true})
	return err
}
