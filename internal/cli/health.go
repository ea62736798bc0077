package cli

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/code"
	"github.com/execbox/execbox/internal/config"
)

// healthTimeout bounds the probes of all runtimes together.
const healthTimeout = 30 * time.Second

var healthCommand = &command{
	name:    "health",
	summary: "show which runtimes work on this machine",
	args:    "[flags]",
	help: `Health opens every runtime execbox was built with, using its section of the
configuration, and asks whether it can run commands here. A runtime whose
prerequisites are present is then probed for real: a sandbox is created,
` + "`true`" + ` runs in it, and it is closed; only then is it AVAILABLE. It prints a
table of NAME, AVAILABLE and DETAIL (what the runtime enforces, or what is
missing), the runtime that "auto" picks, and the languages found on the
configured runtime (as run --languages). With --json it prints
{"runtimes": [{"name", "available", "detail"}], "auto": NAME,
"languages": [...]}.

It exits 0 when the runtime the configuration selects (--runtime; for auto,
the runtime auto picks, which under isolation: require must be the sandbox)
can run commands, 1 when it cannot.`,
	run: runHealth,
}

// runtimeHealth is one row of the health report.
type runtimeHealth struct {
	Name      string `json:"name"`
	Available bool   `json:"available"`
	Detail    string `json:"detail"`
}

// healthReport is what health prints with --json.
type healthReport struct {
	Runtimes []runtimeHealth `json:"runtimes"`
	// Auto is the runtime "auto" picks here, empty when none can run
	// (isolation required and no sandbox).
	Auto string `json:"auto,omitempty"`
	// Languages on the configured runtime; absent when it cannot run.
	Languages []languageReport `json:"languages,omitempty"`
}

func runHealth(ctx context.Context, c *command, s *stdio, args []string) int {
	fs := newFlagSet(c)
	var cf config.Flags
	cf.Register(fs, "runtime", "isolation", "log.level", "log.format")
	jsonOut := fs.Bool("json", false, "print a JSON object instead of tables")
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
	rep := healthReport{Runtimes: probeRuntimes(ctx, cfg, logger)}
	rep.Auto = autoPick(rep.Runtimes, cfg.Isolation == config.IsolationRequire)
	selected := cfg.Runtime
	if selected == config.RuntimeAuto {
		selected = rep.Auto
	}
	ok = false
	for _, r := range rep.Runtimes {
		ok = ok || (r.Name == selected && r.Available)
	}
	if ok {
		rep.Languages = newLanguageReports(healthLanguages(ctx, cfg, logger, selected))
	}
	if err := printHealth(s, rep, *jsonOut); err != nil {
		return s.fail(ExitFailure, err)
	}
	if !ok {
		return 1
	}
	return 0
}

// probeRuntimes asks every runtime for its Health and probes, in
// parallel, those that say they are available.
func probeRuntimes(ctx context.Context, cfg *config.Config, logger *slog.Logger) []runtimeHealth {
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
			if !h.Available {
				return
			}
			start := time.Now()
			if err := execbox.Probe(ctx, rt); err != nil {
				rows[i].Available = false
				rows[i].Detail += "; but " + err.Error()
				return
			}
			rows[i].Detail += fmt.Sprintf("; probe (create, exec true, close) ok in %s", time.Since(start).Round(time.Millisecond))
		})
	}
	wg.Wait()
	return rows
}

// autoPick returns what runtime "auto" picks given the probed rows: the
// isolated runtime where it works, else the fallback unless isolation is
// required, else "".
func autoPick(rows []runtimeHealth, requireIsolation bool) string {
	avail := func(name string) bool {
		return slices.ContainsFunc(rows, func(r runtimeHealth) bool { return r.Name == name && r.Available })
	}
	switch {
	case avail(execbox.IsolatedRuntime):
		return execbox.IsolatedRuntime
	case !requireIsolation && avail(execbox.FallbackRuntime):
		return execbox.FallbackRuntime
	}
	return ""
}

// healthLanguages probes the toolchains of the runtime called name, or
// returns nil if that fails (the runtime rows already say why).
func healthLanguages(ctx context.Context, cfg *config.Config, logger *slog.Logger, name string) []code.Status {
	rt, err := execbox.Open(name, cfg.RuntimeOptions(name, logger))
	if err != nil {
		return nil
	}
	sb, err := rt.Create(ctx, execbox.Spec{})
	if err != nil {
		return nil
	}
	defer sb.Close()
	st, err := code.NewRunner(sb, code.Options{}).Probe(ctx)
	if err != nil {
		return nil
	}
	return st
}

func printHealth(s *stdio, rep healthReport, jsonOut bool) error {
	if jsonOut {
		return printJSON(s.out, rep)
	}
	tw := tabwriter.NewWriter(s.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tAVAILABLE\tDETAIL")
	for _, r := range rep.Runtimes {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Name, yesNo(r.Available), strings.Join(strings.Fields(r.Detail), " "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	auto := rep.Auto
	if auto == "" {
		auto = "none (isolation is required and the sandbox cannot run here)"
	}
	fmt.Fprintf(s.out, "\nauto: %s\n", auto)
	if len(rep.Languages) == 0 {
		return nil
	}
	fmt.Fprintln(s.out)
	return printLanguages(s.out, rep.Languages)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
