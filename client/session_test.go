package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/server"
	"github.com/execbox/execbox/internal/testutil"
)

// TestSessionValues checks what the conformance suite cannot see: the
// capabilities an agent reports, several session values sharing one
// session on the server, and Close and Wait across them.
func TestSessionValues(t *testing.T) {
	testutil.Require(t, testutil.Command("bash"))
	sb := newLocal(t)
	c, err := client.New("unix://" + serveAgent(t, sb, server.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rsb, err := c.Agent(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rsb.Capabilities(), sb.Capabilities(); got != want {
		t.Errorf("Capabilities over the wire = %+v, want %+v", got, want)
	}
	var so execbox.SessionOpener = rsb
	a, err := so.OpenSession(t.Context(), execbox.SessionOptions{Kind: execbox.SessionBash})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Run(t.Context(), execbox.SessionRequest{Code: "x=shared"}); err != nil {
		t.Fatal(err)
	}
	b, err := so.Session(t.Context(), a.ID())
	if err != nil || b.ID() != a.ID() || b.Kind() != execbox.SessionBash {
		t.Fatalf("Session(%s) = %v, %v", a.ID(), b, err)
	}
	res, err := b.Run(t.Context(), execbox.SessionRequest{Code: "echo $x"})
	if err != nil || string(res.Stdout.Data) != "shared\n" {
		t.Errorf("Run through the second value: %q, %v", res.Stdout.Data, err)
	}

	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := a.Run(t.Context(), execbox.SessionRequest{Code: "true"}); !errors.Is(err, execbox.ErrClosed) {
		t.Errorf("Run after Close: %v, want ErrClosed", err)
	}
	// Wait still answers after Close, as in process: with the Result
	// Close received.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := a.Wait(ctx); err != nil {
		t.Errorf("Wait after Close: %v", err)
	}
	// The other value: the session is gone on the server; closing it
	// again does nothing.
	if _, err := b.Run(t.Context(), execbox.SessionRequest{Code: "true"}); !errors.Is(err, execbox.ErrNotFound) {
		t.Errorf("Run through another value after Close: %v, want ErrNotFound", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("Close of a closed session: %v", err)
	}
	if list, err := so.Sessions(t.Context()); err != nil || len(list) != 0 {
		t.Errorf("Sessions after Close: %+v, %v", list, err)
	}
}
