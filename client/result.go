package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"

	"github.com/execbox/execbox/api"
)

// acceptResult is the Accept of a request answered with a command's
// result: its outputs as raw parts when they are large (revision 3), or
// JSON (any server).
const acceptResult = api.ContentMultipart + ", " + api.ContentJSON

// maxPartOutput bounds an output part whose request set no output
// limit the client knows of: a server claiming more is broken.
const maxPartOutput = 1 << 30

// outputsOf returns, once a response value is decoded, where its
// outputs' bytes go (nil when it carries no result).
type outputsOf func() (stdout, stderr *api.Output)

// doResult sends req, asking for a result in either form, and decodes
// the response into v. req.limit bounds each output's bytes.
func (c *Client) doResult(ctx context.Context, req request, v any, outs outputsOf) error {
	req.accept = acceptResult
	limit := req.limit
	if limit <= 0 {
		limit = maxPartOutput
	}
	resp, err := c.do(ctx, req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := decodeResult(resp, v, outs, limit); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			// execbox serve ends a caller reading a result slower than
			// its server.min_read_rate (docs/server.md, "Memory").
			err = fmt.Errorf("%w: the response ended before its length; the server may have ended it because it was read too slowly", err)
		}
		return &transportError{fmt.Errorf("%s %s: decoding the response: %w", req.method, req.path, err)}
	}
	return nil
}

// decodeResult decodes a response carrying a result into v: JSON, or
// multipart/mixed, the JSON in a part named "response" and then the
// bytes of the outputs in parts named "stdout" and "stderr", read
// straight into one buffer each of the part's Content-Length.
func decodeResult(resp *http.Response, v any, outs outputsOf, limit int64) error {
	ct, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || ct != api.ContentMultipart {
		return json.NewDecoder(resp.Body).Decode(v)
	}
	mr := multipart.NewReader(resp.Body, params["boundary"])
	part, err := mr.NextPart()
	if err != nil {
		return err
	}
	if part.FormName() != "response" {
		return fmt.Errorf("the first part is %q, not \"response\"", part.FormName())
	}
	if err := json.NewDecoder(part).Decode(v); err != nil {
		return err
	}
	stdout, stderr := outs()
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var out *api.Output
		switch part.FormName() {
		case "stdout":
			out = stdout
		case "stderr":
			out = stderr
		}
		if out == nil || out.Data != nil {
			return fmt.Errorf("unexpected part %q", part.FormName())
		}
		if out.Data, err = readPart(part, limit); err != nil {
			return fmt.Errorf("part %s: %w", part.FormName(), err)
		}
	}
}

// readPart reads an output part into a buffer of its Content-Length,
// at most limit bytes.
func readPart(part *multipart.Part, limit int64) ([]byte, error) {
	cl := part.Header.Get("Content-Length")
	if cl == "" {
		b, err := io.ReadAll(io.LimitReader(part, limit+1))
		if err == nil && int64(len(b)) > limit {
			err = fmt.Errorf("longer than the output limit of %d bytes", limit)
		}
		return b, err
	}
	n, err := strconv.ParseInt(cl, 10, 64)
	if err != nil || n < 0 || n > limit {
		return nil, fmt.Errorf("Content-Length %q: want 0 to the output limit of %d bytes", cl, limit)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(part, b); err != nil {
		return nil, err
	}
	if extra, _ := part.Read(make([]byte, 1)); extra > 0 {
		return nil, fmt.Errorf("longer than its Content-Length %d", n)
	}
	return b, nil
}

func resultOutputs(r *api.Result) outputsOf {
	return func() (*api.Output, *api.Output) { return &r.Stdout, &r.Stderr }
}

func statusOutputs(st *api.ProcessStatus) outputsOf {
	return func() (*api.Output, *api.Output) {
		if st.Result == nil {
			return nil, nil
		}
		return &st.Result.Stdout, &st.Result.Stderr
	}
}
