package cli

import (
	"encoding/json"
	"io"
	"time"

	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/code"
	"github.com/execbox/execbox/git"
)

// What the CLI prints with --json. Packages execbox, git and code have no
// JSON form of their own: every JSON the CLI prints is built here (or in
// package api) and follows the HTTP API's conventions (api/doc.go): field
// names in snake_case, durations as milliseconds in fields ending in
// "_ms", sizes in bytes, times in RFC 3339, a command's result as
// api.Result (output as text when valid UTF-8, else base64 data).

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// millis returns d in milliseconds, as api does.
func millis(d time.Duration) float64 { return float64(d) / 1e6 }

// languageReport is code.Status: one language of run --languages --json
// and of health --json.
type languageReport struct {
	Language   code.Language     `json:"language"`
	Available  bool              `json:"available"`
	Toolchain  string            `json:"toolchain,omitempty"`
	Path       string            `json:"path,omitempty"`
	Version    string            `json:"version,omitempty"`
	Detail     string            `json:"detail,omitempty"`
	Toolchains []toolchainReport `json:"toolchains"`
}

// toolchainReport is code.ToolchainStatus.
type toolchainReport struct {
	Name      string `json:"name"`
	Available bool   `json:"available"`
	Path      string `json:"path,omitempty"`
	Version   string `json:"version,omitempty"`
	Detail    string `json:"detail,omitempty"`
}

func newLanguageReports(st []code.Status) []languageReport {
	out := make([]languageReport, len(st))
	for i, s := range st {
		out[i] = languageReport{
			Language: s.Language, Available: s.Available, Toolchain: s.Toolchain,
			Path: s.Path, Version: s.Version, Detail: s.Detail,
			Toolchains: make([]toolchainReport, len(s.Toolchains)),
		}
		for j, t := range s.Toolchains {
			out[i].Toolchains[j] = toolchainReport(t)
		}
	}
	return out
}

// runReport is what `execbox run --json` prints: the result (api.Result,
// its fields at the top level) plus the run's details.
type runReport struct {
	api.Result
	Phase     code.Phase    `json:"phase"`
	Compile   *api.Result   `json:"compile,omitempty"`
	Language  code.Language `json:"language"`
	Toolchain string        `json:"toolchain"`
	Version   string        `json:"version"`
	Command   []string      `json:"command"`
	Limits    *api.Limits   `json:"limits,omitempty"`
	Dir       string        `json:"dir,omitempty"`
}

func newRunReport(res code.Result) runReport {
	out := runReport{
		Result: api.NewResult(res.Result), Phase: res.Phase, Language: res.Language,
		Toolchain: res.Toolchain, Version: res.Version, Command: res.Command,
		Limits: api.NewLimits(res.Limits), Dir: res.Dir,
	}
	if res.Compile != nil {
		c := api.NewResult(*res.Compile)
		out.Compile = &c
	}
	return out
}

// taskReport is git.TaskResult: one task of `execbox parallel --json`.
type taskReport struct {
	Name   string `json:"name"`
	Branch string `json:"branch"`
	Path   string `json:"path"`
	Base   string `json:"base,omitempty"`
	// OK is git.TaskResult.OK.
	OK         bool           `json:"ok"`
	Result     *api.Result    `json:"result,omitempty"`
	Status     *api.GitStatus `json:"status,omitempty"`
	Commit     string         `json:"commit,omitempty"`
	Head       string         `json:"head,omitempty"`
	DurationMS float64        `json:"duration_ms"`
	Error      string         `json:"error,omitempty"`
}

func newTaskReport(r *git.TaskResult) taskReport {
	out := taskReport{
		Name: r.Name, Branch: r.Branch, Path: r.Path, Base: r.Base, OK: r.OK(),
		Commit: r.Commit, Head: r.Head, DurationMS: millis(r.Duration),
	}
	if r.Result != nil {
		res := api.NewResult(*r.Result)
		out.Result = &res
	}
	if r.Status != nil {
		out.Status = api.NewGitStatus(r.Status)
	}
	if r.Err != nil {
		out.Error = r.Err.Error()
	}
	return out
}

// commitReport is git.Commit: one commit of `execbox git log --json`.
type commitReport struct {
	Hash       string          `json:"hash"`
	Parents    []string        `json:"parents"`
	Author     signatureReport `json:"author"`
	AuthorTime time.Time       `json:"author_time"`
	Committer  signatureReport `json:"committer"`
	CommitTime time.Time       `json:"commit_time"`
	Subject    string          `json:"subject"`
	Message    string          `json:"message"`
}

// signatureReport is git.Signature.
type signatureReport struct {
	Name  string `json:"name"`
	Email string `json:"email"`
}

func newCommitReports(commits []git.Commit) []commitReport {
	out := make([]commitReport, len(commits))
	for i, c := range commits {
		out[i] = commitReport{
			Hash: c.Hash, Parents: append([]string{}, c.Parents...),
			Author: signatureReport(c.Author), AuthorTime: c.AuthorTime,
			Committer: signatureReport(c.Committer), CommitTime: c.CommitTime,
			Subject: c.Subject, Message: c.Message,
		}
	}
	return out
}

// worktreeReport is git.Worktree: one entry of `execbox git worktree list
// --json`.
type worktreeReport struct {
	Path           string `json:"path"`
	Head           string `json:"head,omitempty"`
	Branch         string `json:"branch,omitempty"`
	Main           bool   `json:"main,omitempty"`
	Bare           bool   `json:"bare,omitempty"`
	Detached       bool   `json:"detached,omitempty"`
	Locked         bool   `json:"locked,omitempty"`
	LockReason     string `json:"lock_reason,omitempty"`
	Prunable       bool   `json:"prunable,omitempty"`
	PrunableReason string `json:"prunable_reason,omitempty"`
}

func newWorktreeReports(wts []git.Worktree) []worktreeReport {
	out := make([]worktreeReport, len(wts))
	for i, w := range wts {
		out[i] = worktreeReport(w)
	}
	return out
}
