//go:build linux

package image

import (
	"os"

	"github.com/google/go-containerregistry/pkg/authn"
)

// Environment variables of the default keychain.
const (
	// UserEnv and PasswordEnv are credentials for registries that Docker's
	// configuration has none for.
	UserEnv     = "EXECBOX_REGISTRY_USER"
	PasswordEnv = "EXECBOX_REGISTRY_PASSWORD"
	// RegistryEnv, when set, is the one registry (host[:port], as in a
	// reference: "ghcr.io", "localhost:5000") UserEnv and PasswordEnv are
	// sent to. Unset, they go to any registry: set it whenever the image
	// references come from someone else (an agent), or the password goes
	// to whatever registry they name.
	RegistryEnv = "EXECBOX_REGISTRY"
)

// defaultKeychain is authn.DefaultKeychain (~/.docker/config.json,
// $DOCKER_CONFIG, credential helpers), then the credentials of the
// environment, read once, now.
func defaultKeychain() authn.Keychain {
	user, pass := os.Getenv(UserEnv), os.Getenv(PasswordEnv)
	if user == "" && pass == "" {
		return authn.DefaultKeychain
	}
	return authn.NewMultiKeychain(authn.DefaultKeychain, envKeychain{
		registry: os.Getenv(RegistryEnv),
		auth:     authn.AuthConfig{Username: user, Password: pass},
	})
}

// envKeychain gives one set of credentials to one registry, or to all.
type envKeychain struct {
	registry string // "" for any
	auth     authn.AuthConfig
}

func (k envKeychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	if k.registry != "" && r.RegistryStr() != k.registry {
		return authn.Anonymous, nil
	}
	return authn.FromConfig(k.auth), nil
}
