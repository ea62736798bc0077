package session

import (
	"bufio"
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/agent/proc"
)

// bashInit is sourced by the session's bash before anything else; %s are
// the private directory, quoted. It closes the terminal's fd 3 (bash
// holds the terminal as /dev/tty already), silences what an interactive
// shell prints at its prompt, keeps no history, and defines the function
// that restores $? before each command.
const bashInit = `exec 3>&-
PS1= PS2= PS0= PROMPT_COMMAND=
unset HISTFILE MAILCHECK MAIL MAILPATH
set +o history +H
shopt -s expand_aliases
__execbox_rc() { \builtin return "$1"; }
\builtin printf 'R\n' >%s/status
`

// bashOptions sets the process options of a bash session.
func (s *Session) bashOptions(o *proc.Options) error {
	if err := s.writePrivate("init.sh", fmt.Sprintf(bashInit, shellQuote(s.dir))); err != nil {
		return err
	}
	if err := s.writePrivate("c", ""); err != nil {
		return err
	}
	o.Args = []string{o.Args[0], "--norc", "--noprofile", "--noediting", "-i"}
	o.Terminal = &proc.Terminal{Rows: 24, Cols: 80}
	return nil
}

// writePrivate writes a file of the private directory, owned by the
// session's user: a new file, whatever the user left at its name.
func (s *Session) writePrivate(name, content string) error {
	return s.pdir.WriteFile(name, []byte(content), 0o600, s.uid, s.gid)
}

// bashInit makes bash source the init script; it reports R at its end.
func (s *Session) bashInit() error {
	line := `\builtin . ` + shellQuote(filepath.Join(s.dir, "init.sh")) + "\n"
	if _, err := s.p.WriteStdin(context.Background(), []byte(line)); err != nil {
		return fmt.Errorf("session %s: bash input: %w", s.cfg.ID, err)
	}
	return nil
}

// bashSend starts command n: the text goes to the file c, and a fixed
// line of ours to bash's input.
func (s *Session) bashSend(n uint64, nonce, code string, st *streams) error {
	if err := s.writePrivate("c", code); err != nil {
		return err
	}
	d := shellQuote(s.dir)
	in := "/dev/null"
	if st.inPath != "" {
		in = shellQuote(st.inPath)
	}
	var b strings.Builder
	b.Grow(320 + 3*len(d))
	fmt.Fprintf(&b, `\builtin printf 'S %d\n' >%s/status;`, n, d)
	fmt.Fprintf(&b, `IFS= \builtin read -r -d '' __execbox_cmd <%s/c || \builtin true;`, d)
	fmt.Fprintf(&b, `__execbox_rc %d && \builtin true;`, s.prevRC)
	fmt.Fprintf(&b, `\builtin eval "$__execbox_cmd" >%s 2>%s <%s;`, shellQuote(st.outPath), shellQuote(st.errPath), in)
	fmt.Fprintf(&b, `\builtin printf 'E %d %s %%d\n' "$?" >%s/status`+"\n", n, nonce, d)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := s.p.WriteStdin(ctx, []byte(b.String()))
	return err
}

// bashRecover follows an interrupt of command n: if bash abandoned the
// command line, it never reports E; this line reports the status after
// the interrupt. If it did report E, this I is stale and ignored.
func (s *Session) bashRecover(n uint64, nonce string) {
	line := fmt.Sprintf(`\builtin printf 'I %d %s %%d\n' "$?" >%s/status`+"\n", n, nonce, shellQuote(s.dir))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.p.WriteStdin(ctx, []byte(line)); err != nil {
		s.log.Debug("recovery line", "err", err)
	}
}

// readStatus parses what the interpreter reports on the status FIFO and
// passes it on, until the FIFO is closed.
func (s *Session) readStatus() {
	if s.cfg.Kind == execbox.SessionPython {
		s.readFrames()
		return
	}
	r := bufio.NewReader(s.status)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		m, ok := parseStatus(strings.TrimSuffix(line, "\n"))
		if !ok {
			s.log.Warn("unparsable status line ignored", "line", line)
			continue
		}
		if !s.deliver(m) {
			return
		}
	}
}

// parseStatus parses "R", "S N", "E N NONCE CODE" or "I N NONCE CODE".
func parseStatus(line string) (msg, bool) {
	f := strings.Fields(line)
	if len(f) == 0 || len(f[0]) != 1 {
		return msg{}, false
	}
	m := msg{kind: f[0][0]}
	switch {
	case m.kind == 'R' && len(f) == 1:
		return m, true
	case m.kind == 'S' && len(f) == 2:
	case (m.kind == 'E' || m.kind == 'I') && len(f) == 4:
		m.nonce = f[2]
		code, err := strconv.Atoi(f[3])
		if err != nil {
			return msg{}, false
		}
		m.code = code
	default:
		return msg{}, false
	}
	id, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return msg{}, false
	}
	m.id = id
	return m, true
}

// shellQuote quotes s for bash in single quotes.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
