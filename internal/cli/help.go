package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

var helpCommand = &command{
	name:    "help",
	summary: "show help for execbox or one of its commands",
	args:    "[COMMAND]",
	help:    `Help prints the usage of COMMAND, or of execbox. 'execbox COMMAND -h' does the same.`,
	run:     runHelp,
}

func runHelp(ctx context.Context, c *command, s *stdio, args []string) int {
	fs := newFlagSet(c)
	if code, done := s.parse(c, fs, args); done {
		return code
	}
	switch fs.NArg() {
	case 0:
		printMainUsage(s.out)
		return 0
	case 1:
		target := lookup(fs.Arg(0))
		if target == nil {
			return s.fail(ExitUsage, fmt.Errorf("help: unknown command %q (commands: %s)", fs.Arg(0), commandNames()))
		}
		// Build the command's flags by asking it for help.
		return target.run(ctx, target, s, []string{"-h"})
	}
	return s.fail(ExitUsage, fmt.Errorf("help: too many arguments (usage: execbox help [COMMAND])"))
}

func printMainUsage(w io.Writer) {
	fmt.Fprint(w, `execbox runs commands in a workspace, with limits, and reports exactly what
happened: exit code, signal, timeout, output.

Usage:
  execbox COMMAND [flags] [arguments]

Commands:
`)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	for _, c := range commands {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	tw.Flush()
	fmt.Fprint(w, `
Configuration comes from execbox.yaml (--config FILE, else $EXECBOX_CONFIG,
else ./execbox.yaml if present), then EXECBOX_* environment variables, then
flags; each flag's help names its key and variable.

Run 'execbox help COMMAND' for a command's flags.
`)
}

func printCommandUsage(w io.Writer, c *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: execbox %s %s\n\n%s\n", c.name, c.args, strings.TrimSpace(c.help))
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	fmt.Fprint(w, "\nFlags:\n")
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		if tn, ok := f.Value.(interface{ TypeName() string }); ok {
			name = tn.TypeName()
		}
		if name != "" {
			name = " " + name
		}
		fmt.Fprintf(w, "  --%s%s\n        %s", f.Name, name, usage)
		switch f.DefValue {
		case "", "0", "0s", "false", "[]":
		default:
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}
