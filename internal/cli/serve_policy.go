package cli

import (
	"fmt"
	"os"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/config"
	"github.com/execbox/execbox/internal/server"
)

// servePolicy returns the policy of the server.policy_* settings: a
// webhook, or nil without server.policy_url. The webhook's token is
// read from server.policy_token_env, then blanked in execbox's own
// environment as the server's token is, so commands do not inherit it.
func servePolicy(s *stdio, c *config.Server) (server.Policy, error) {
	if c.PolicyURL == "" {
		return nil, nil // not a nil *Webhook: Options.Policy must stay nil
	}
	var token string
	if name := c.PolicyTokenEnv; name != "" {
		token = os.Getenv(name)
		if token == "" {
			return nil, execbox.Invalid("server.policy_token_env", "$%s is empty or unset", name)
		}
		os.Unsetenv(name)
		if err := scrubEnviron(name); err != nil {
			s.warn("could not blank $%s in /proc/%d/environ (processes of this user can read the policy token there): %v", name, os.Getpid(), err)
		}
	}
	wh, err := server.NewWebhook(server.WebhookOptions{URL: c.PolicyURL, Timeout: c.PolicyTimeout, Token: token})
	if err != nil {
		return nil, fmt.Errorf("server.policy_url: %w", err)
	}
	s.warn("policy: every create, exec, session run and file change is first asked of %s (within %s; refused if it does not answer)", c.PolicyURL, c.PolicyTimeout)
	return wh, nil
}
