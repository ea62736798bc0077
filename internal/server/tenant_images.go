package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/netguard"
)

// DefaultTenantRegistries are the registries a tenant's create may name
// an image of when Options.TenantRegistries is nil: public ones, which
// no service of the server's own network answers for.
var DefaultTenantRegistries = []string{
	"index.docker.io", "ghcr.io", "quay.io", "registry.k8s.io", "public.ecr.aws", "mcr.microsoft.com", "gcr.io",
}

// tenantImage refuses the image of a tenant's (non-admin) create unless
// its registry is one of Options.TenantRegistries. A create naming an
// image the server does not have makes the server pull it, from its own
// network: a tenant naming 127.0.0.1:8500/x or an internal host would
// make the server send requests where the tenant's sandboxes cannot
// reach, and read their answers in the error. Admins pull from anywhere
// (POST /v1/images/pull, or a create of theirs). Host paths are refused
// before this, by hostPaths.
func (s *Server) tenantImage(r *http.Request, spec *execbox.Spec) error {
	if spec.Image == "" || localRef(spec.Image) || principal(r).Admin {
		return nil
	}
	allowed := s.opts.TenantRegistries
	if allowed == nil {
		allowed = DefaultTenantRegistries
	}
	ref, err := name.ParseReference(spec.Image)
	if err != nil {
		return execbox.Invalid("image", "%q is not an image reference: %v", spec.Image, err)
	}
	reg := ref.Context().RegistryStr()
	if slices.ContainsFunc(allowed, func(a string) bool { return strings.EqualFold(registryName(a), reg) }) {
		return nil
	}
	return &execbox.FieldError{Field: "image", Kind: execbox.ErrPermission, Problem: fmt.Sprintf(
		"registry %s is not one this server's tenants may pull from (server.tenant_registries: %s); an admin key may", reg, strings.Join(allowed, ", "))}
}

// registryName is a registry as name.ParseReference names it:
// docker.io is index.docker.io.
func registryName(r string) string {
	if reg, err := name.NewRegistry(r); err == nil {
		return reg.RegistryStr()
	}
	return r
}

// tenantContext is the context for what the server does for r: marked
// netguard.ForTenant for a tenant's (non-admin) request, so that an
// image pulled for it (package image) goes only to the registry its
// reference names and to public addresses, never where a redirect, a
// token realm or a layer URL of that registry points on the server's
// own network, and its errors carry no registry's answer.
func tenantContext(r *http.Request) context.Context {
	if principal(r).Admin {
		return r.Context()
	}
	return netguard.ForTenant(r.Context())
}
