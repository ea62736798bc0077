package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/execbox/execbox/api"
)

// The warm pools of the server (execbox serve): sandboxes made ahead of
// demand from a template. Create with Spec.Pool set takes one.

// Pools lists the server's pools with their counts, by name.
func (c *Client) Pools(ctx context.Context) ([]api.PoolStatus, error) {
	var l api.PoolList
	err := c.doJSON(ctx, http.MethodGet, "/v1/pools", nil, nil, &l)
	return l.Pools, err
}

// Pool returns one pool's definition and counts; an unknown name is
// ErrNotFound.
func (c *Client) Pool(ctx context.Context, name string) (api.PoolStatus, error) {
	var st api.PoolStatus
	err := c.doJSON(ctx, http.MethodGet, "/v1/pools/"+url.PathEscape(name), nil, nil, &st)
	return st, err
}

// DefinePool defines a pool, which fills in the background; a name in
// use is ErrInvalidArgument naming "name".
func (c *Client) DefinePool(ctx context.Context, p api.Pool) (api.PoolStatus, error) {
	var st api.PoolStatus
	err := c.doJSON(ctx, http.MethodPost, "/v1/pools", nil, p, &st)
	return st, err
}

// DeletePool removes a pool and closes its idle sandboxes; those taken
// from it stay their callers'.
func (c *Client) DeletePool(ctx context.Context, name string) error {
	return c.doJSON(ctx, http.MethodDelete, "/v1/pools/"+url.PathEscape(name), nil, nil, nil)
}
