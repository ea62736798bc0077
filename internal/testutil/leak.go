package testutil

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// VerifyNoLeaks runs a package's tests (m.Run) and then fails the test
// binary if any goroutine the tests started is still running: every
// goroutine ends with its context or Close (STYLE.md). Call it from the
// package's TestMain:
//
//	func TestMain(m *testing.M) { testutil.VerifyNoLeaks(m) }
//
// A package whose TestMain does more calls LeakCheck(m.Run()) instead.
func VerifyNoLeaks(m *testing.M) {
	goleak.VerifyTestMain(m, leakIgnores...)
}

// IgnoreLeak is an option of LeakCheck: a goroutine running fn (a
// package-qualified function name) anywhere in its stack is no leak.
// Each use says why the goroutine outlives what started it.
type IgnoreLeak string

// LeakCheck returns code, the result of m.Run, or 1 if goroutines the
// tests started are still running (reported on stderr), for a TestMain
// that does more than run the tests: os.Exit(testutil.LeakCheck(m.Run())).
func LeakCheck(code int, ignore ...IgnoreLeak) int {
	if code != 0 {
		return code
	}
	opts := append([]goleak.Option(nil), leakIgnores...)
	for _, fn := range ignore {
		opts = append(opts, goleak.IgnoreAnyFunction(string(fn)))
	}
	if err := goleak.Find(opts...); err != nil {
		fmt.Fprintln(os.Stderr, "goleak: goroutines left after the tests:", err)
		return 1
	}
	return code
}

// leakIgnores are the goroutines of libraries that live as long as the
// process by design, each with why; nothing of execbox's own is here.
var leakIgnores = []goleak.Option{
	// The idle keep-alive connections of a shared http.Transport (the
	// Docker SDK's and http.DefaultTransport's) read and write until the
	// peer closes them or the transport is told to close idle ones,
	// which a process-wide transport never is.
	// (Anywhere in the stack: an idle one waits in the poller.)
	goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
	goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	// os/signal's loop, started by the first signal.Notify of the
	// process, runs until it exits.
	goleak.IgnoreTopFunction("os/signal.signal_recv"),
}
