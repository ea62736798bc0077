package agent

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/execbox/execbox"
)

// defaultPath is used when the agent's own environment has no PATH.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// buildEnv returns the command's environment: what the policy passes from
// host (the agent's own environment), then spec's variables, then req's.
// HOME is the workspace unless set explicitly.
func buildEnv(host []string, policy execbox.EnvPolicy, allow []string, home string, layers ...map[string]string) []string {
	hostMap := make(map[string]string, len(host))
	for _, kv := range host {
		if k, v, ok := strings.Cut(kv, "="); ok {
			hostMap[k] = v
		}
	}
	env := make(map[string]string)
	switch policy {
	case execbox.EnvInherit:
		for k, v := range hostMap {
			env[k] = v
		}
	default: // clean, allow
		env["PATH"] = defaultPath
		if v, ok := hostMap["PATH"]; ok && v != "" {
			env["PATH"] = v
		}
		env["LANG"] = "C.UTF-8"
		if v, ok := hostMap["LANG"]; ok && v != "" {
			env["LANG"] = v
		}
		env["HOME"] = home
		if policy == execbox.EnvAllow {
			for _, k := range allow {
				if v, ok := hostMap[k]; ok {
					env[k] = v
				}
			}
		}
	}
	for _, layer := range layers {
		for k, v := range layer {
			env[k] = v
		}
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

func getenv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// lookPath finds file in the PATH of the command's environment, not the
// agent's, the way the program's shell would. A name with a slash is taken
// relative to dir.
func lookPath(file, path, dir string) (string, error) {
	if strings.Contains(file, "/") {
		p := file
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := executable(p, file); err != nil {
			return "", err
		}
		return p, nil
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, file)
		if executable(p, file) == nil {
			return p, nil
		}
	}
	return "", &execbox.FieldError{Field: "command[0]", Problem: "executable " + quote(file) + " not found in PATH", Kind: execbox.ErrNotFound}
}

// executable checks p, reporting problems under the name the caller gave.
func executable(p, name string) error {
	fi, err := os.Stat(p)
	switch {
	case err != nil:
		return &execbox.FieldError{Field: "command[0]", Problem: quote(name) + " not found", Kind: execbox.ErrNotFound}
	case fi.IsDir() || fi.Mode()&0o111 == 0:
		return &execbox.FieldError{Field: "command[0]", Problem: quote(name) + " is not an executable file", Kind: execbox.ErrPermission}
	}
	return nil
}

func quote(s string) string { return `"` + s + `"` }
