package git

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/execbox/execbox"
)

// The package documentation ("Repositories written by untrusted code")
// says what this file does and why.

// hostHardening is the command-line configuration of every git command
// on a sandbox without isolation.
var hostHardening = []string{
	"core.hooksPath=/dev/null",
	"core.fsmonitor=false",
	"credential.helper=",
	"core.askPass=",
	"protocol.ext.allow=never",
}

// hostSafeKeys are the repository config keys git may find on a
// sandbox without isolation: "section.key", or "section.*.key" for any
// subsection. Every other key is refused (ErrUntrustedConfig).
var hostSafeKeys = []string{
	// What git init and clone write, and the usual core settings.
	"core.repositoryformatversion", "core.filemode", "core.bare", "core.logallrefupdates",
	"core.ignorecase", "core.precomposeunicode", "core.symlinks", "core.autocrlf", "core.eol",
	"core.safecrlf", "core.checkstat", "core.trustctime", "core.quotepath", "core.untrackedcache",
	"core.splitindex", "core.sparsecheckout", "core.sparsecheckoutcone", "core.abbrev",
	"core.commentchar", "core.commentstring", "core.compression", "core.loosecompression",
	"core.bigfilethreshold", "core.preloadindex", "core.multipackindex", "core.commitgraph",
	"core.warnambiguousrefs", "core.longpaths", "core.protecthfs", "core.protectntfs",
	"extensions.objectformat", "extensions.worktreeconfig", "extensions.refstorage",
	"index.version", "index.threads", "feature.manyfiles",
	"init.defaultbranch",
	// Remotes and branches (transports other than these are off:
	// protocol.ext.allow=never, and no transport program can be named).
	"remote.*.url", "remote.*.pushurl", "remote.*.fetch", "remote.*.push", "remote.*.tagopt",
	"remote.*.prune", "remote.*.prunetags", "remote.*.mirror", "remote.*.skipdefaultupdate",
	"branch.*.remote", "branch.*.merge", "branch.*.rebase", "branch.*.pushremote", "branch.*.description",
	"submodule.*.url", "submodule.*.active", "submodule.*.branch",
	"url.*.insteadof", "url.*.pushinsteadof",
	// Identity and behaviour.
	"user.name", "user.email",
	"pull.rebase", "pull.ff", "push.default", "push.autosetupremote",
	"fetch.prune", "fetch.prunetags", "merge.ff", "merge.conflictstyle",
	"diff.renames", "diff.algorithm", "status.showuntrackedfiles", "rerere.enabled",
	"gc.auto", "i18n.commitencoding", "i18n.logoutputencoding",
	"color.ui", "advice.*",
	// git lfs's own settings (its programs run only as a filter, which
	// is refused).
	"lfs.*", "lfs.*.*",
}

// hostSafe reports whether key (as git config --list prints it: section
// and variable lowercased) is in hostSafeKeys.
func hostSafe(key string) bool {
	section, rest, ok := strings.Cut(key, ".")
	if !ok {
		return false
	}
	sub, variable := "", rest
	if i := strings.LastIndexByte(rest, '.'); i >= 0 {
		sub, variable = rest[:i], rest[i+1:]
	}
	for _, k := range hostSafeKeys {
		ks, kr, _ := strings.Cut(k, ".")
		if ks != section {
			continue
		}
		kv := kr
		if strings.HasPrefix(kr, "*.") {
			if sub == "" {
				continue
			}
			kv = kr[2:]
		} else if sub != "" {
			continue
		}
		if kv == "*" || kv == variable {
			return true
		}
	}
	return false
}

// isolated reports whether sb says its commands are isolated from the
// host. A sandbox that does not say is taken as not isolated.
func isolated(sb execbox.Sandbox) bool {
	c, ok := sb.(interface{ Capabilities() execbox.Capabilities })
	return ok && c.Capabilities().Isolation
}

// checkHostConfig refuses cl when the repository config that git will
// read in cl's directory sets a key outside hostSafeKeys. Keys of the
// command line (ours) are not the repository's. git config itself is
// not refused, so that a repository's config can be read and mended:
// it starts no program (its editor is ":").
func (c *Client) checkHostConfig(ctx context.Context, cl call) error {
	if len(cl.args) > 0 && cl.args[0] == "config" {
		return nil
	}
	res, err := c.git(ctx, call{op: cl.op, dir: cl.dir, args: []string{"config", "--list", "--show-scope", "--includes", "-z"},
		parsed: true, checked: true})
	if err != nil {
		return err
	}
	// Scope and entry ("key\nvalue", or "key" alone) alternate.
	var bad []string
	fields := strings.Split(strings.TrimSuffix(res.Stdout.Text(), "\x00"), "\x00")
	for i := 0; i+1 < len(fields); i += 2 {
		scope, kv := fields[i], fields[i+1]
		if scope == "command" {
			continue
		}
		key, _, _ := strings.Cut(kv, "\n")
		if !hostSafe(key) && !slices.Contains(bad, key) && len(bad) < 10 {
			bad = append(bad, strings.ToValidUTF8(key[:min(len(key), 200)], "?"))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return &Error{Op: cl.op, Dir: cl.dir, Kind: ErrUntrustedConfig,
		Message: fmt.Sprintf("the repository's configuration sets %s, not known to be safe where git runs on the host (this sandbox has no isolation): remove it, or run git on an isolated runtime",
			strings.Join(bad, ", "))}
}
