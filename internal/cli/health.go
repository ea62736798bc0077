package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/config"
)

// healthTimeout bounds the probes of all runtimes together.
const healthTimeout = 30 * time.Second

var healthCommand = &command{
	name:    "health",
	summary: "show which runtimes work on this machine",
	args:    "[flags]",
	help: `Health opens every runtime execbox was built with, using its section of the
configuration, and asks whether it can run commands here. It prints a table
of NAME, AVAILABLE and DETAIL (what is missing, for a runtime that is not
available), or with --json an array of {"name", "available", "detail"}.

It exits 0 when the runtime the configuration selects (--runtime) is
available, 1 when it is not.`,
	run: runHealth,
}

// runtimeHealth is one row of the health report.
type runtimeHealth struct {
	Name      string `json:"name"`
	Available bool   `json:"available"`
	Detail    string `json:"detail"`
}

func runHealth(ctx context.Context, c *command, s *stdio, args []string) int {
	fs := newFlagSet(c)
	var cf config.Flags
	cf.Register(fs, "runtime", "log.level", "log.format")
	jsonOut := fs.Bool("json", false, "print a JSON array instead of a table")
	if code, done := s.parse(c, fs, args); done {
		return code
	}
	if fs.NArg() > 0 {
		return s.fail(ExitUsage, fmt.Errorf("health: takes no arguments, got %q", fs.Args()))
	}
	cfg, code, ok := s.loadConfig(&cf)
	if !ok {
		return code
	}
	logger := cfg.Logger(s.err)

	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	names := execbox.Names()
	rows := make([]runtimeHealth, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			rows[i] = runtimeHealth{Name: name}
			rt, err := execbox.Open(name, cfg.RuntimeOptions(name, logger))
			if err != nil {
				rows[i].Detail = err.Error()
				return
			}
			h := rt.Health(ctx)
			rows[i].Available, rows[i].Detail = h.Available, h.Detail
		})
	}
	wg.Wait()

	if *jsonOut {
		enc := json.NewEncoder(s.out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rows); err != nil {
			return s.fail(ExitFailure, err)
		}
	} else {
		tw := tabwriter.NewWriter(s.out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tAVAILABLE\tDETAIL")
		for _, r := range rows {
			avail := "no"
			if r.Available {
				avail = "yes"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Name, avail, strings.Join(strings.Fields(r.Detail), " "))
		}
		if err := tw.Flush(); err != nil {
			return s.fail(ExitFailure, err)
		}
	}
	for _, r := range rows {
		if r.Name == cfg.Runtime && !r.Available {
			return 1
		}
	}
	return 0
}
