package git

import "testing"

func TestHostSafe(t *testing.T) {
	for key, want := range map[string]bool{
		"core.bare":                 true,
		"remote.origin.url":         true,
		"remote.a.b.url":            true, // a subsection may hold dots
		"branch.main.merge":         true,
		"url.https://x/.insteadof":  true,
		"advice.detachedhead":       true,
		"core.fsmonitor":            false,
		"core.worktree":             false,
		"core.sshcommand":           false,
		"remote.origin.uploadpack":  false,
		"filter.lfs.clean":          false,
		"diff.x.textconv":           false,
		"include.path":              false,
		"includeif.onbranch:x.path": false,
		"remote.url":                false, // no subsection
		"core.x.bare":               false, // a subsection where none is allowed
		"user":                      false,
		"":                          false,
		"credential.helper":         false,
		"submodule.x.update":        false,
		"protocol.ext.allow":        false,
	} {
		if got := hostSafe(key); got != want {
			t.Errorf("hostSafe(%q) = %v, want %v", key, got, want)
		}
	}
}

// FuzzHostSafe: any key, even one git would never print, gets an answer
// without a panic, and one with no section is never safe.
func FuzzHostSafe(f *testing.F) {
	for _, k := range []string{"core.bare", "remote.o.url", "a..b", ".", "x.*.y", "lfs.a.b.c"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		if hostSafe(key) && (len(key) == 0 || key[0] == '.') {
			t.Errorf("hostSafe(%q) = true", key)
		}
	})
}
