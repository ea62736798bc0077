package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/code"
)

var _ code.Delegate = (*Sandbox)(nil)

// RunCode implements code.Delegate: the server (or agent) runs req with
// code.Run, in one request (POST code); req.Stdin is streamed as for
// Exec. A server that predates POST code gives code.ErrNotDelegated, and
// code.Run then runs req step by step. If ctx ends first the connection
// is dropped, which cancels the run on the server; RunCode returns ctx's
// error without the partial result.
func (s *Sandbox) RunCode(ctx context.Context, req code.Request) (code.Result, error) {
	if err := s.checkOpen(); err != nil {
		return code.Result{}, err
	}
	if err := req.Validate(); err != nil {
		return code.Result{}, err
	}
	hreq := request{method: http.MethodPost, path: s.prefix + "code"}
	stop, err := s.streamedBody(&hreq, api.NewCodeRequest(req), req.Stdin)
	if err != nil {
		return code.Result{}, err
	}
	defer stop()
	resp, err := s.c.do(ctx, hreq)
	if err != nil {
		if noEndpoint(err) {
			return code.Result{}, fmt.Errorf("%w: %v", code.ErrNotDelegated, err)
		}
		return code.Result{}, err
	}
	defer resp.Body.Close()
	var out api.CodeResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		if ctx.Err() != nil {
			return code.Result{}, ctx.Err()
		}
		return code.Result{}, &transportError{fmt.Errorf("POST %s: decoding the response: %w", hreq.path, err)}
	}
	return out.Result.CodeResult(), out.Error.Err()
}

// noEndpoint reports the error of a server that has no such endpoint:
// unsupported, naming the field "path".
func noEndpoint(err error) bool {
	var fe *execbox.FieldError
	return errors.Is(err, execbox.ErrUnsupported) && errors.As(err, &fe) && fe.Field == "path"
}
