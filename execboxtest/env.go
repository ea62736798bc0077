package execboxtest

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/execbox/execbox"
)

// envOf runs env (argv form, no shell adding variables) and parses it.
func envOf(t *testing.T, sb execbox.Sandbox, req execbox.ExecRequest) map[string]string {
	t.Helper()
	req.Command = []string{"env"}
	out := execOK(t, sb, req)
	m := map[string]string{}
	for line := range strings.SplitSeq(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && k != "" {
			m[k] = v
		}
	}
	return m
}

// cleanNames are the variables EnvClean passes or sets.
var cleanNames = map[string]bool{"PATH": true, "LANG": true, "HOME": true}

// testEnvPolicy checks guarantee 5. The secret is a variable of the test
// process: for a runtime without isolation that is the host environment
// the runtime passes under EnvInherit. For an isolated runtime the
// inherited environment is its agent's, not the test's, so the secret must
// not appear under any policy; the policies are then checked against
// whatever the agent's environment holds (found under EnvInherit).
func testEnvPolicy(t *testing.T, s *suite) {
	specEnv := map[string]bool{}
	sb := s.create(t, func(sp *execbox.Spec) {
		for k := range sp.Env {
			specEnv[k] = true
		}
		sp.EnvPolicy, sp.EnvAllow = "", nil // test the default
	})
	ws := sb.Workspace()
	inherit := envOf(t, sb, execbox.ExecRequest{EnvPolicy: execbox.EnvInherit})
	clean := envOf(t, sb, execbox.ExecRequest{})
	explicitClean := envOf(t, sb, execbox.ExecRequest{EnvPolicy: execbox.EnvClean})
	// leaked reports whether k=v, present in the command's environment
	// under a restrictive policy, came from the runtime's environment: it
	// is there under EnvInherit with the same value, is not one of the
	// clean set or the spec's own, and is not about this sandbox.
	leaked := func(k, v string) bool {
		iv, ok := inherit[k]
		return ok && iv == v && !cleanNames[k] && !specEnv[k] && !strings.Contains(v, ws)
	}

	t.Run("clean", func(t *testing.T) {
		for name, env := range map[string]map[string]string{"default": clean, "EnvClean": explicitClean} {
			if v, ok := env[s.secretKey]; ok {
				t.Errorf("%s policy: the host secret %s=%q reached the command (guarantee 5)", name, s.secretKey, v)
			}
			for k, v := range env {
				if leaked(k, v) {
					t.Errorf("%s policy: %s=%q of the runtime's environment reached the command; only PATH and LANG may", name, k, v)
				}
			}
			if env["PATH"] == "" {
				t.Errorf("%s policy: PATH is not set", name)
			}
			if env["HOME"] != ws {
				t.Errorf("%s policy: HOME = %q, want the workspace %q", name, env["HOME"], ws)
			}
		}
	})

	t.Run("inherit", func(t *testing.T) {
		got, ok := inherit[s.secretKey]
		switch {
		case !s.caps.Isolation && (!ok || got != s.secretVal):
			t.Errorf("EnvInherit: %s = %q (set %v), want %q from the host environment", s.secretKey, got, ok, s.secretVal)
		case s.caps.Isolation && ok:
			t.Errorf("EnvInherit on an isolated runtime: the test process's %s reached the command; the environment inherited must be the boundary's own", s.secretKey)
		}
		if inherit["PATH"] == "" {
			t.Error("EnvInherit: PATH is not set")
		}
	})

	t.Run("allow", func(t *testing.T) {
		// Some variable of the inherited environment that clean drops.
		name, val := s.secretKey, s.secretVal
		if s.caps.Isolation {
			name = ""
			for k, v := range inherit {
				if _, inClean := clean[k]; !inClean && !cleanNames[k] && !specEnv[k] && !strings.ContainsAny(v, "\n") {
					name, val = k, v
					break
				}
			}
		}
		if name == "" {
			// The isolated runtime's inherited environment (its agent's)
			// has nothing beyond the clean set, so no variable tells
			// EnvAllow apart: allowing all of it must give the clean set.
			t.Logf("the inherited environment has nothing beyond the clean set: %v", slices.Sorted(maps.Keys(inherit)))
			allowed := envOf(t, sb, execbox.ExecRequest{EnvPolicy: execbox.EnvAllow, EnvAllow: slices.Collect(maps.Keys(inherit))})
			if !maps.Equal(allowed, clean) {
				t.Errorf("EnvAllow of the whole inherited environment, the clean set here: %v, want %v", allowed, clean)
			}
		} else {
			checkEnvAllow(t, sb, name, val, ws, leaked)
		}
		// Allowing a variable that does not exist adds nothing.
		missing := "EXECBOX_TEST_UNSET_" + strings.ToUpper(token())
		if v, ok := envOf(t, sb, execbox.ExecRequest{EnvPolicy: execbox.EnvAllow, EnvAllow: []string{missing}})[missing]; ok {
			t.Errorf("EnvAllow of an unset variable: %s=%q appeared", missing, v)
		}
	})

	t.Run("explicit", func(t *testing.T) {
		env := envOf(t, sb, execbox.ExecRequest{Env: map[string]string{
			"EXECBOX_A": "1",
			"EXECBOX_B": "with spaces; $(and) `shell` chars",
		}})
		if env["EXECBOX_A"] != "1" || env["EXECBOX_B"] != "with spaces; $(and) `shell` chars" {
			t.Errorf("Env: EXECBOX_A=%q EXECBOX_B=%q, want the values verbatim", env["EXECBOX_A"], env["EXECBOX_B"])
		}
		if _, ok := env[s.secretKey]; ok {
			t.Errorf("explicit Env under the default policy let %s through", s.secretKey)
		}
		// Explicit variables override the policy's, HOME and PATH included.
		env = envOf(t, sb, execbox.ExecRequest{Env: map[string]string{"HOME": "/elsewhere", "PATH": "/bin:/usr/bin"}})
		if env["HOME"] != "/elsewhere" || env["PATH"] != "/bin:/usr/bin" {
			t.Errorf("Env overriding HOME and PATH: HOME=%q PATH=%q", env["HOME"], env["PATH"])
		}
	})

	t.Run("spec-defaults", func(t *testing.T) {
		sb := s.create(t, func(sp *execbox.Spec) {
			if sp.Env == nil {
				sp.Env = map[string]string{}
			}
			sp.Env["EXECBOX_SPEC"] = "spec"
			sp.Env["EXECBOX_OVER"] = "spec"
			sp.EnvPolicy = execbox.EnvInherit
		})
		env := envOf(t, sb, execbox.ExecRequest{Env: map[string]string{"EXECBOX_OVER": "request"}})
		if env["EXECBOX_SPEC"] != "spec" || env["EXECBOX_OVER"] != "request" {
			t.Errorf("Spec.Env and request Env: EXECBOX_SPEC=%q EXECBOX_OVER=%q, want spec, request", env["EXECBOX_SPEC"], env["EXECBOX_OVER"])
		}
		if !s.caps.Isolation && env[s.secretKey] != s.secretVal {
			t.Errorf("Spec.EnvPolicy inherit: %s not inherited", s.secretKey)
		}
		env = envOf(t, sb, execbox.ExecRequest{EnvPolicy: execbox.EnvClean})
		if _, ok := env[s.secretKey]; ok {
			t.Errorf("request EnvClean over Spec inherit: %s leaked", s.secretKey)
		}
		if env["EXECBOX_SPEC"] != "spec" {
			t.Errorf("request EnvClean: Spec.Env EXECBOX_SPEC = %q, want spec (explicit variables are always added)", env["EXECBOX_SPEC"])
		}
	})
}

func testWorkingDir(t *testing.T, s *suite) {
	sb := s.create(t, nil)
	ws := sb.Workspace()
	if !strings.HasPrefix(ws, "/") {
		t.Fatalf("Workspace() = %q, want an absolute path", ws)
	}
	shOK(t, sb, "mkdir -p sub/deeper")
	// Compare physical paths inside the sandbox, where Workspace() is valid.
	phys := strings.TrimSpace(shOK(t, sb, `cd "$1" && pwd -P`, ws))
	for _, tc := range []struct{ dir, want string }{
		{"", phys},
		{".", phys},
		{"sub", phys + "/sub"},
		{"sub/deeper", phys + "/sub/deeper"},
		{"sub/../sub", phys + "/sub"},
		{ws, phys},
		{ws + "/sub", phys + "/sub"},
	} {
		got := strings.TrimSpace(execOK(t, sb, execbox.ExecRequest{Command: sh("pwd -P"), Dir: tc.dir}))
		if got != tc.want {
			t.Errorf("Dir %q: working directory %q, want %q", tc.dir, got, tc.want)
		}
	}
	_, err := sb.Exec(t.Context(), execbox.ExecRequest{Command: []string{"true"}, Dir: "no-such-dir"})
	wantKind(t, "Exec with a missing Dir", err, execbox.ErrNotFound)
}

// checkEnvAllow checks EnvAllow naming name, a variable of the runtime's
// environment that the clean set drops: it passes with val, with the
// clean set, and nothing else of that environment.
func checkEnvAllow(t *testing.T, sb execbox.Sandbox, name, val, ws string, leaked func(k, v string) bool) {
	t.Helper()
	allowed := envOf(t, sb, execbox.ExecRequest{EnvPolicy: execbox.EnvAllow, EnvAllow: []string{name}})
	if got := allowed[name]; got != val {
		t.Errorf("EnvAllow [%s]: %s = %q, want %q", name, name, got, val)
	}
	if allowed["HOME"] != ws || allowed["PATH"] == "" {
		t.Errorf("EnvAllow: HOME = %q, PATH = %q; want the clean set too", allowed["HOME"], allowed["PATH"])
	}
	for k, v := range allowed {
		if k != name && leaked(k, v) {
			t.Errorf("EnvAllow [%s]: %s, not allowed, reached the command", name, k)
		}
	}
}
