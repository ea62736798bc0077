package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/git"
)

var _ git.Delegate = (*Sandbox)(nil)

// RunGit implements git.Delegate: the server (or agent) runs call with
// git.Do, in one request (POST git/{op}). A git command that failed
// there comes back as the same *git.Error. The call's credentials travel
// in the request body, as the bearer token does, over the client's
// connection; use TLS or a unix socket to a server that is not local. A
// server that predates POST git/{op} gives git.ErrNotDelegated.
func (s *Sandbox) RunGit(ctx context.Context, call git.Call) (git.Reply, error) {
	if err := s.checkOpen(); err != nil {
		return git.Reply{}, err
	}
	body := api.NewGitRequest(call)
	if body == nil {
		return git.Reply{}, fmt.Errorf("%w: unknown operation %q", git.ErrNotDelegated, call.Op)
	}
	var out api.GitReply
	err := s.c.doJSON(ctx, http.MethodPost, s.prefix+"git/"+url.PathEscape(call.Op), nil, body, &out)
	switch {
	case err != nil && noEndpoint(err):
		return git.Reply{}, fmt.Errorf("%w: %v", git.ErrNotDelegated, err)
	case err != nil:
		return git.Reply{}, err
	case out.Error != nil:
		return git.Reply{}, out.Error.Err()
	}
	return out.Reply(), nil
}
