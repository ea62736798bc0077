package git

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/execbox/execbox"
)

// Commit is one commit of a Log.
type Commit struct {
	// Hash is the full commit hash.
	Hash string
	// Parents are the parents' hashes: none for a root commit, two or
	// more for a merge.
	Parents []string
	// Author wrote the change at AuthorTime.
	Author     Signature
	AuthorTime time.Time
	// Committer recorded it at CommitTime.
	Committer  Signature
	CommitTime time.Time
	// Subject is the first line of Message.
	Subject string
	// Message is the whole commit message, without a trailing newline.
	Message string
}

// LogOptions for Repo.Log.
type LogOptions struct {
	// Rev is where the history starts ("main", "origin/main..HEAD").
	// Empty means HEAD.
	Rev string
	// MaxCount limits the number of commits. Zero means DefaultLogCount;
	// negative means no limit.
	MaxCount int
	// Skip leaves out that many commits first.
	Skip int
	// Paths limit the history to commits touching these pathspecs.
	Paths []string
}

// DefaultLogCount is the number of commits Log returns when
// LogOptions.MaxCount is zero.
const DefaultLogCount = 100

// logFields is the number of NUL-separated fields of one commit in
// logFormat.
const logFields = 9

// logFormat prints a commit as NUL-separated fields; with -z commits are
// NUL-terminated too, so the fields come in groups of logFields.
const logFormat = "--format=%H%x00%P%x00%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%B"

// Log lists commits, newest first. A repository without commits has an
// empty history, not an error.
func (r *Repo) Log(ctx context.Context, opts LogOptions) ([]Commit, error) {
	if rep, ok, err := r.delegated(ctx, Call{Op: OpLog, Log: opts}); ok {
		return rep.Log, err
	}

	var errs []error
	if opts.Rev != "" {
		errs = append(errs, checkRef("rev", opts.Rev))
	}
	if opts.Skip < 0 {
		errs = append(errs, execbox.Invalid("skip", "must not be negative"))
	}
	errs = append(errs, checkPaths("paths", opts.Paths))
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	args := []string{"log", "-z", logFormat, "--no-color"}
	switch {
	case opts.MaxCount == 0:
		args = append(args, fmt.Sprintf("--max-count=%d", DefaultLogCount))
	case opts.MaxCount > 0:
		args = append(args, fmt.Sprintf("--max-count=%d", opts.MaxCount))
	}
	if opts.Skip > 0 {
		args = append(args, fmt.Sprintf("--skip=%d", opts.Skip))
	}
	args = append(args, "--end-of-options")
	if opts.Rev != "" {
		args = append(args, opts.Rev)
	}
	args = append(append(args, "--"), opts.Paths...)
	res, err := r.git(ctx, call{op: "log", args: args, parsed: true})
	if err != nil {
		var ge *Error
		if opts.Rev == "" && errors.As(err, &ge) && strings.Contains(ge.Message, "does not have any commits yet") {
			return nil, nil
		}
		return nil, err
	}
	commits, err := parseLog(string(res.Stdout.Data))
	if err != nil {
		return nil, fmt.Errorf("git log in %s: %w", r.dir, err)
	}
	return commits, nil
}

// parseLog parses the output of git log -z with logFormat.
func parseLog(out string) ([]Commit, error) {
	out = strings.TrimSuffix(out, "\x00")
	if out == "" {
		return nil, nil
	}
	f := strings.Split(out, "\x00")
	if len(f)%logFields != 0 {
		return nil, fmt.Errorf("unexpected output: %d fields", len(f))
	}
	commits := make([]Commit, 0, len(f)/logFields)
	for i := 0; i < len(f); i += logFields {
		c := Commit{
			Hash:      f[i],
			Parents:   strings.Fields(f[i+1]),
			Author:    Signature{Name: f[i+2], Email: f[i+3]},
			Committer: Signature{Name: f[i+5], Email: f[i+6]},
			Message:   strings.TrimRight(f[i+8], "\n"),
		}
		var err error
		if c.AuthorTime, err = time.Parse(time.RFC3339, f[i+4]); err != nil {
			return nil, fmt.Errorf("commit %s: author date: %w", c.Hash, err)
		}
		if c.CommitTime, err = time.Parse(time.RFC3339, f[i+7]); err != nil {
			return nil, fmt.Errorf("commit %s: commit date: %w", c.Hash, err)
		}
		c.Subject, _, _ = strings.Cut(c.Message, "\n")
		commits = append(commits, c)
	}
	return commits, nil
}
