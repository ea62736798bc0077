// Package session implements execbox sessions: a long-lived bash, a
// long-lived Python interpreter, and a program on a pseudo-terminal. The
// agent starts the interpreter as one of the sandbox's processes (through
// internal/proc, with the sandbox's environment, limits, user and marker,
// so tree kills and Sandbox.Close reach it); this package drives it.
//
// # Framing
//
// The one rule: what a command prints, reads or contains never travels on
// a channel the session reads its own protocol from. A command's stdout
// and stderr are FIFOs of their own in the session's private directory
// (mode 0700, outside the workspace: /dev/shm where it is a tmpfs, which
// in the sandbox runtime is the boundary's private one), its
// stdin is /dev/null or a FIFO fed from the request, and the interpreter
// reports on a status FIFO that user code is never given. So output that
// contains a marker, a nonce or a half-written frame is just output, and a
// command that never reads stdin reads EOF.
//
// What this framing does not do: keep a command from forging later
// results through the interpreter itself, whose state every command
// shares. A bash command that defines a function named builtin (or eval,
// printf, read) runs in place of this package's line for every later
// command, and reports the status and output it likes (its function can
// read the line's nonce); a Python cell can walk to the driver's frames.
// Nothing in the interpreter can be out of reach of code that runs in
// it, so execbox.Session documents the rule instead: a result that must
// be trusted comes from a new process or session.
//
// The private directory belongs to the command user (its interpreter
// opens the FIFOs and reads the command file there), who can rename it or
// replace any entry with a symlink at any moment, while the side that
// drives the session may be privileged. So this side never acts in it by
// path: it holds the directory open from its creation (internal/dirfd)
// and creates, opens, chowns and removes entries relative to that
// descriptor, without following symlinks, checking that a FIFO is a FIFO
// before a byte moves.
//
// A command has ended when the interpreter says so, not when its output
// reaches EOF: a background job may hold it open for hours. Its output is
// then what is in the FIFO at that moment (proc.Capture.Finish). If no
// writer holds the FIFO any more, it serves the next command; if one does,
// it is unlinked and drained to nowhere until that job closes it, and the
// next command gets a new FIFO. So the common command makes no FIFO, and a
// background job's later output is never taken for a later command's.
//
// # Bash
//
// bash runs interactive (-i, --norc, --noprofile, --noediting) with its
// standard input a pipe from execbox, its standard output and error pipes
// kept for diagnostics, and a pseudo-terminal as controlling terminal only
// (passed as fd 3, closed by the init script). Interactive with a
// terminal means job control: every job (pipeline) runs in a process
// group of its own, which the terminal knows as its foreground group while
// it runs, and bash returns to its top level after an interrupt instead of
// dying.
//
// For command N, execbox writes the command text to the file c in the
// private directory and writes one fixed line of its own to bash's input
// (paths quoted, no user text; o.K and e.K are the current FIFOs):
//
//	\builtin printf 'S N\n' >D/status;
//	IFS= \builtin read -r -d '' __execbox_cmd <D/c || \builtin true;
//	__execbox_rc PREV && \builtin true;
//	\builtin eval "$__execbox_cmd" >D/o.K 2>D/e.K </dev/null;
//	\builtin printf 'E N NONCE %d\n' "$?" >D/status
//
// The command text only ever reaches bash's parser through eval, at top
// level (not in a function, so declare, local and return behave as
// typed at a prompt): an unterminated quote or heredoc is a syntax error
// of eval (status 2, bash's message on the command's stderr), never input
// that swallows the next line. __execbox_rc restores $? to the previous
// command's status. The NONCE is random per command; a status line that
// does not carry the running command's number and nonce is ignored.
//
// A timeout (or a cancelled context) interrupts as Ctrl-C does, once bash
// has reported S (so the line was entirely read): SIGINT to the terminal's
// foreground process group and to bash itself. bash abandons the rest of
// the command line and returns to its top level, so the E line may never
// come; execbox therefore follows the interrupt with a recovery line,
// "\builtin printf 'I N NONCE %d\n' "$?" >D/status", which reports the
// status after the interrupt (130). If the command is still running after
// the grace period, its foreground process group is killed (SIGKILL) and,
// if bash still does not report after another grace period, or the
// foreground group is bash's own (a builtin loop ignoring SIGINT), the
// session is killed and reported closed.
//
// # Python
//
// The driver (driver.py, embedded) runs with python3 -u. Requests are
// length-prefixed JSON frames on its standard input, which the driver
// moves to a private descriptor at once, giving user code /dev/null;
// responses are frames on the status FIFO; a result carries the number
// and nonce of its request. For each cell the driver
// installs the cell's FIFOs on fds 0, 1 and 2 (so subprocesses' output is
// captured too), reports "started", parses the cell with ast, runs all but
// a final expression statement, evaluates that one and returns its repr,
// or the exception as type, message and traceback (without the driver's
// frames). A timeout sends SIGINT to the interpreter's process group, as
// Ctrl-C would, repeated until the driver acknowledges the
// KeyboardInterrupt it raised; between cells the driver blocks and
// ignores SIGINT. A cell still running after the grace period ends the
// session.
//
// # PTY
//
// A PTY session is a process started on a terminal (proc.Terminal with
// Stdio): Write types into the master, the master's output is the event
// log of the process, Resize sets the window size.
package session
