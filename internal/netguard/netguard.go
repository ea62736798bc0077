// Package netguard keeps the connections a server makes on a tenant's
// behalf off the server's own network. A tenant names an image; the
// server pulls it from its registry, following the registry's
// redirects, token addresses and layer URLs: without a guard, a
// registry the tenant may use (or a name it controls) sends the server
// to its loopback, its private network or the cloud's metadata address,
// where the tenant's sandboxes cannot go.
//
// The request handler marks the context of a tenant's request
// (ForTenant); whoever connects somewhere for it (package image) asks
// IsTenant and dials with DialContext, which checks the address each
// connection is about to use, after name resolution: a name that
// resolves to a private address is refused like the address itself.
//
// The package depends on nothing of execbox's but its error kinds, so
// that the server (linked into the in-sandbox agent) can mark contexts
// without linking what pulls images.
package netguard

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"syscall"

	"github.com/execbox/execbox"
)

type tenantKey struct{}

// ForTenant marks ctx as a tenant's (a request of a non-admin key): what
// is fetched for it goes only to the addresses its own rules allow.
func ForTenant(ctx context.Context) context.Context {
	return context.WithValue(ctx, tenantKey{}, true)
}

// IsTenant reports whether ctx was marked by ForTenant.
func IsTenant(ctx context.Context) bool {
	v, _ := ctx.Value(tenantKey{}).(bool)
	return v
}

// Special ranges Public refuses beside what netip classifies.
var special = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network": 0.0.0.0 reaches the host itself
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT, clouds' internal networks
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and broadcast
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64: any IPv4 address, private ones too
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("2002::/16"),       // 6to4: embeds any IPv4 address
	netip.MustParsePrefix("fec0::/10"),       // deprecated site-local
	netip.MustParsePrefix("100::/64"),        // discard-only
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("::ffff:0:0:0/96"), // IPv4-translated
}

// Public reports whether a is an address of the public internet: not
// loopback, private (RFC 1918, fc00::/7), link-local (169.254.0.0/16,
// where clouds answer metadata requests, fe80::/10), unspecified,
// multicast, carrier-grade NAT or another special range. An
// IPv4-mapped IPv6 address is judged as its IPv4 address.
func Public(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsUnspecified() ||
		a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() || a.IsMulticast() {
		return false
	}
	for _, p := range special {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// RefusedError is a connection DialContext did not make. It matches
// execbox.ErrPermission.
type RefusedError struct {
	Addr string // the address dialed, "ip:port"
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("connection to %s refused: a tenant's request reaches only its registry and public addresses, not the server's loopback, private or link-local networks", e.Addr)
}

func (e *RefusedError) Unwrap() error { return execbox.ErrPermission }

// PublicPort is Public of ap's address, whatever its port: the rule of
// DialContext by default.
func PublicPort(ap netip.AddrPort) bool { return Public(ap.Addr()) }

// DialContext returns a dial function for an http.Transport: it dials as
// d does, except that a connection to an address allow refuses (nil:
// PublicPort) fails with a *RefusedError before it is made. The check is
// on the IP each connection attempt uses, after name resolution. exempt
// reports the addresses, as dialed ("host:port", before resolution),
// that are not checked (the registry the operator allowed, even on a
// private network); nil exempts none.
func DialContext(d *net.Dialer, allow func(netip.AddrPort) bool, exempt func(addr string) bool) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if allow == nil {
		allow = PublicPort
	}
	guarded := *d
	inner := d.ControlContext
	guarded.ControlContext = func(ctx context.Context, network, address string, c syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil || !allow(netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())) {
			return &RefusedError{Addr: address}
		}
		if inner != nil {
			return inner(ctx, network, address, c)
		}
		return nil
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if exempt != nil && exempt(addr) {
			return d.DialContext(ctx, network, addr)
		}
		return guarded.DialContext(ctx, network, addr)
	}
}
