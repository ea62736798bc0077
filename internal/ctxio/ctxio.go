// Package ctxio bounds reads by a context.
package ctxio

import (
	"context"
	"io"
)

// Reader returns r, reading nothing more once ctx is done. A Read
// already blocked in r is not interrupted: the caller closes r for that.
func Reader(ctx context.Context, r io.Reader) io.Reader { return reader{ctx, r} }

type reader struct {
	ctx context.Context
	r   io.Reader
}

func (c reader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
