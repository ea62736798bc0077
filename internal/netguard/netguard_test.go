package netguard

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/execbox/execbox"
)

func TestPublic(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1": false, "127.1.2.3": false, "::1": false, "::ffff:127.0.0.1": false,
		"10.0.0.1": false, "172.16.5.4": false, "192.168.1.1": false, "fd00:ec2::254": false,
		"169.254.169.254": false, "fe80::1": false, "0.0.0.0": false, "0.1.2.3": false, "::": false,
		"100.64.0.1": false, "224.0.0.1": false, "255.255.255.255": false, "64:ff9b::7f00:1": false,
		"8.8.8.8": true, "2606:4700:4700::1111": true, "140.82.112.3": true, "::ffff:8.8.8.8": true,
	} {
		if got := Public(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Public(%s) = %v, want %v", addr, got, want)
		}
	}
}

// TestDialContext: a name that resolves to loopback is refused at the
// connection, as the address itself is; an exempt address is not.
func TestDialContext(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	_, port, _ := net.SplitHostPort(addr)
	dial := DialContext(&net.Dialer{}, nil, func(a string) bool { return a == addr })
	for _, a := range []string{"localhost:" + port, "127.0.0.2:" + port} {
		c, err := dial(context.Background(), "tcp", a)
		var re *RefusedError
		if err == nil {
			c.Close()
		}
		if !errors.As(err, &re) || !errors.Is(err, execbox.ErrPermission) {
			t.Errorf("dial %s: %v, want a RefusedError", a, err)
		}
	}
	c, err := dial(context.Background(), "tcp", addr)
	if err != nil {
		t.Fatalf("dial the exempt %s: %v", addr, err)
	}
	c.Close()
	if !IsTenant(ForTenant(context.Background())) || IsTenant(context.Background()) {
		t.Error("ForTenant does not mark a context")
	}
}
