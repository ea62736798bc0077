package server_test

import (
	"testing"

	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/internal/server"
)

// TestNotUTF8Refused: a request whose JSON strings are not UTF-8 is
// refused naming the field, not run with U+FFFD in their place.
func TestNotUTF8Refused(t *testing.T) {
	e := newEnv(t, server.Options{})
	sb := e.sandbox()
	for _, tc := range []struct{ body, field string }{
		{`{"command":["printf","%s","a` + "\xff" + `"]}`, "command[2]"},
		{`{"command":["true"],"env":{"V":"` + "\xfe" + `"}}`, "env.V"},
	} {
		r := e.json("POST", sb+"exec", tc.body)
		wantError(t, tc.body, r, 400, api.CodeInvalidArgument, tc.field)
	}
}
