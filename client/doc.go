// Package client is the Go client of the execbox protocol (package api):
// of an execbox server (execbox serve), and of an agent serving one
// sandbox inside an isolation boundary.
//
//	c, err := client.New("http://127.0.0.1:7070", client.WithToken(token))
//	sb, err := c.Create(ctx, execbox.Spec{}, client.CreateOptions{})
//	defer sb.Close()
//	res, err := sb.Exec(ctx, execbox.ExecRequest{Command: []string{"go", "test", "./..."}})
//
// An isolated runtime reaches the agent it started over a unix socket:
//
//	c, err := client.New("unix:///run/execbox/sb-1.sock")
//	sb, err := c.Agent(ctx) // the agent's one sandbox
//
// Sandbox implements execbox.Sandbox exactly as the in-process agent
// does, which the conformance suite checks through runtimes/remote:
//
//   - Errors keep their kinds: errors.Is(err, execbox.ErrNotFound) and
//     errors.As(err, &fieldErr) answer as they would in process, field
//     names included; a server that cannot be reached is
//     execbox.ErrUnavailable. Requests are validated here first, so a bad
//     one costs no round trip.
//   - Cancelling an Exec's context asks the server to kill the command's
//     whole tree; Exec returns the partial Result with the context's
//     error. Exec's Stdin is streamed as the command reads it.
//   - Process.Events reconnects when a stream breaks, from the sequence
//     number after the last event it yielded: no event is lost or
//     repeated. Wait is retried the same way.
//   - Sandbox implements execbox.SessionOpener: sessions live on the
//     server, and a Session value is a handle on one (Sandbox.Session
//     attaches another). Session.Run cancels as Exec does: the server
//     interrupts the command as a cancelled ctx does in process, and Run
//     returns the partial SessionResult with the context's error. PTY
//     events reconnect as a process's do.
//   - Capabilities are those the server reported for the sandbox when it
//     was created or attached: no request is made.
//   - Snapshot and Download copy the tar stream to the caller's writer as
//     it arrives; Upload streams the caller's reader. Nothing large is held
//     in memory except what the Files methods themselves take or return
//     as []byte.
//
// A call whose context carries a request ID (api.WithRequestID) sends it
// as X-Request-ID, so the server's log lines (and its agent's) can be
// found by it: execbox serve passes each request's ID on this way.
//
// Readers given to Exec (Stdin), Start (Stdin) and Upload are read from
// another goroutine, and never closed; as in process, a read blocked when
// the call returns completes later, its data discarded.
package client
