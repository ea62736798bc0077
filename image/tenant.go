//go:build linux

package image

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/netguard"
)

// tenantTransport is the transport of a tenant's pull from reg: it
// connects to reg itself (and to the proxy reg is reached through, if
// any) wherever they are, and elsewhere (redirects, token realms, layer
// URLs) only to the addresses Options.TenantAddr allows, checked on the
// IP of each connection (netguard.DialContext). Through a proxy, which
// makes the connections itself, the names of other hosts are resolved
// and checked before a request is sent to it.
func (s *Store) tenantTransport(reg name.Registry) http.RoundTripper {
	t := remote.DefaultTransport.(*http.Transport).Clone()
	regURL := &url.URL{Scheme: reg.Scheme(), Host: reg.RegistryStr()}
	regAddr := hostPort(regURL)
	var proxyAddr string
	if p, err := t.Proxy(&http.Request{URL: regURL}); err == nil && p != nil {
		proxyAddr = hostPort(p)
	}
	exempt := func(addr string) bool {
		return strings.EqualFold(addr, regAddr) || proxyAddr != "" && strings.EqualFold(addr, proxyAddr)
	}
	t.DialContext = netguard.DialContext(&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}, s.tenantIP, exempt)
	proxy := t.Proxy
	t.Proxy = func(req *http.Request) (*url.URL, error) {
		p, err := proxy(req)
		if err != nil || p == nil || strings.EqualFold(hostPort(req.URL), regAddr) {
			return p, err
		}
		return p, s.checkName(req.Context(), req.URL)
	}
	return t
}

// hostPort is u's host and port, the port of its scheme when it has
// none: what a transport dials.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// checkName refuses the host of u unless each of its addresses is one a
// tenant's pull may reach.
func (s *Store) checkName(ctx context.Context, u *url.URL) error {
	_, port, _ := net.SplitHostPort(hostPort(u))
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return fmt.Errorf("port of %s: %w", u.Host, err)
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", u.Hostname())
	if err != nil {
		return err
	}
	allow := s.tenantIP
	if allow == nil {
		allow = netguard.PublicPort
	}
	for _, ip := range ips {
		if ap := netip.AddrPortFrom(ip.Unmap(), uint16(p)); !allow(ap) {
			return &netguard.RefusedError{Addr: ap.String()}
		}
	}
	return nil
}

// tenantError is err as a tenant may see it: a registry's answer (a
// *transport.Error, whose text carries the body of the answer: where it
// came from a service of the server's network, that service's secrets)
// is told by its status alone, keeping its execbox kind.
func tenantError(ref string, err error) error {
	var te *transport.Error
	if err == nil || !errors.As(err, &te) {
		return err
	}
	kind := kindOf(err, true)
	for _, k := range []error{execbox.ErrInvalidArgument, execbox.ErrNotFound, execbox.ErrPermission,
		execbox.ErrUnavailable, execbox.ErrUnsupported, execbox.ErrResourceExhausted} {
		if errors.Is(err, k) {
			kind = k
			break
		}
	}
	msg := fmt.Errorf("the registry answered HTTP %d (its answer is not shown to tenants)", te.StatusCode)
	if kind == nil {
		return fmt.Errorf("image %s: %w", ref, msg)
	}
	return fmt.Errorf("image %s: %w", ref, &kindError{kind, msg})
}
