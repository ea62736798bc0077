package client

import (
	"context"
	"net/http"

	"github.com/execbox/execbox/api"
)

// The image store of the server (execbox serve): the images its
// runtimes make sandboxes from, on the server's machine. A server
// without a store answers ErrUnsupported.

// Images lists the server's images, least recently used first.
func (c *Client) Images(ctx context.Context) ([]api.Image, error) {
	var l api.ImageList
	err := c.doJSON(ctx, http.MethodGet, "/v1/images", nil, nil, &l)
	return l.Images, err
}

// PullImage makes the server pull ref (resolving it again even if
// cached) and returns the image. A path (an OCI layout or tarball) is
// one on the server's machine, refused with ErrPermission unless the
// server allows host paths. Cancelling ctx cancels the pull, which then
// leaves nothing behind.
func (c *Client) PullImage(ctx context.Context, ref string) (api.Image, error) {
	var img api.Image
	err := c.doJSON(ctx, http.MethodPost, "/v1/images/pull", nil, api.PullImageRequest{Ref: ref}, &img)
	return img, err
}

// RemoveImage removes ref from the server's store and returns what it
// was. An image a sandbox uses is refused with ErrUnavailable.
func (c *Client) RemoveImage(ctx context.Context, ref string) (api.Image, error) {
	var img api.Image
	err := c.doJSON(ctx, http.MethodPost, "/v1/images/remove", nil, api.RemoveImageRequest{Ref: ref}, &img)
	return img, err
}

// PruneImages removes the server's least recently used images that no
// sandbox uses until its store holds at most req.MaxSize bytes (0:
// every image not in use), and says what it removed.
func (c *Client) PruneImages(ctx context.Context, req api.PruneImagesRequest) (api.PruneImagesResponse, error) {
	var res api.PruneImagesResponse
	err := c.doJSON(ctx, http.MethodPost, "/v1/images/prune", nil, req, &res)
	return res, err
}
