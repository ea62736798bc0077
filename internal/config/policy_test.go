package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/execbox/execbox"
)

// TestServerPolicyValidated: every bad policy setting is reported at
// once, naming its key and where it came from.
func TestServerPolicyValidated(t *testing.T) {
	file := writeFile(t, "c.yaml", "server:\n  policy_url: ftp://hook/\n  policy_timeout: 0s\n")
	_, err := Load(LoadOptions{Getenv: env(map[string]string{"EXECBOX_CONFIG": file})})
	if !errors.Is(err, execbox.ErrInvalidArgument) {
		t.Fatalf("Load = %v, want ErrInvalidArgument", err)
	}
	for _, s := range []string{
		`c.yaml:2: server.policy_url: "ftp://hook/" is not an http or https URL`,
		"c.yaml:3: server.policy_timeout: must be positive",
	} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q lacks %q", err, s)
		}
	}
	_, err = Load(LoadOptions{Getenv: env(map[string]string{"EXECBOX_SERVER_POLICY_TOKEN_ENV": "T", "EXECBOX_SERVER_POLICY_URL": "http:///x"})})
	for _, s := range []string{`EXECBOX_SERVER_POLICY_URL: "http:///x" has no host`} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("error %v lacks %q", err, s)
		}
	}
	_, err = Load(LoadOptions{Getenv: env(map[string]string{"EXECBOX_SERVER_POLICY_TOKEN_ENV": "T"})})
	if err == nil || !strings.Contains(err.Error(), "EXECBOX_SERVER_POLICY_TOKEN_ENV: is set but server.policy_url is not") {
		t.Errorf("token variable without a URL: %v", err)
	}
	c, err := Load(LoadOptions{Getenv: env(map[string]string{"EXECBOX_SERVER_POLICY_URL": "https://hook.internal/decide"})})
	if err != nil || c.Server.PolicyURL != "https://hook.internal/decide" || c.Server.PolicyTimeout.Seconds() != 5 {
		t.Errorf("a good URL: %+v, %v", c, err)
	}
}
