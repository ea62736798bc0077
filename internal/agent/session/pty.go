package session

import (
	"strings"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/agent/proc"
)

// defaultTerm is TERM for a PTY session whose environment has none:
// programs on a terminal need one to draw.
const defaultTerm = "xterm-256color"

// ptyOptions sets the process options of a PTY session: the program on a
// terminal that is its standard streams, with an event log.
func (s *Session) ptyOptions(o *proc.Options) error {
	o.Terminal = &proc.Terminal{Rows: s.cfg.Rows, Cols: s.cfg.Cols, Stdio: true}
	o.OutputLimit = ptyOutputLimit
	o.EventWindow = s.cfg.EventWindow
	if o.EventWindow <= 0 {
		o.EventWindow = execbox.DefaultEventWindow
	}
	o.FlowControl = s.cfg.FlowControl
	hasTerm := false
	for _, kv := range o.Env {
		hasTerm = hasTerm || strings.HasPrefix(kv, "TERM=")
	}
	if !hasTerm {
		o.Env = append(o.Env[:len(o.Env):len(o.Env)], "TERM="+defaultTerm)
	}
	return nil
}
