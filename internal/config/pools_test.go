package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
)

func TestPoolsFromFile(t *testing.T) {
	file := writeFile(t, "c.yaml", `
server:
  pools:
    - name: py
      runtime: local
      initial: 4
      min_idle: 2
      max: 8
      fallback: fail
      spec:
        env: {A: "1"}
        limits: {open_files: 256}
        setup:
          - shell: echo ready
        assets:
          - path: hello.txt
            content: {text: hi}
    - name: plain
`)
	c, err := Load(LoadOptions{Getenv: env(map[string]string{"EXECBOX_CONFIG": file})})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Server.Pools) != 2 {
		t.Fatalf("pools %+v", c.Server.Pools)
	}
	p := c.Server.Pools[0]
	if p.Name != "py" || p.Runtime != "local" || p.Initial != 4 || p.MinIdle != 2 || p.Max != 8 || p.Fallback != api.FallbackFail ||
		p.Spec.Env["A"] != "1" || p.Spec.Limits == nil || p.Spec.Limits.OpenFiles != 256 ||
		len(p.Spec.Setup) != 1 || p.Spec.Setup[0].Shell != "echo ready" ||
		len(p.Spec.Assets) != 1 || p.Spec.Assets[0].Content.Text != "hi" {
		t.Errorf("pool %+v", p)
	}
	if c.Server.Pools[1].Name != "plain" || !c.IsSet("server.pools") {
		t.Errorf("second pool %+v", c.Server.Pools[1])
	}
}

// TestPoolErrors: each problem names its key and the line of its value.
func TestPoolErrors(t *testing.T) {
	file := writeFile(t, "c.yaml", `server:
  pools:
    - name: ok
      min_idle: 1
    - name: bad
      initial: 1
      min_idle: -1
      max: "many"
      fallback: maybe
      spec:
        limits:
          pids: -3
        imag: x
    - name: ok
      min_idel: 2
    - just a string
`)
	_, err := Load(LoadOptions{Getenv: env(map[string]string{"EXECBOX_CONFIG": file})})
	if !errors.Is(err, execbox.ErrInvalidArgument) {
		t.Fatalf("Load = %v", err)
	}
	t.Logf("errors:\n%v", err)
	msg := err.Error()
	for _, s := range []string{
		"c.yaml:7: server.pools[1].min_idle: must not be negative",
		`c.yaml:8: server.pools[1].max: want int64, not string`,
		`c.yaml:10: server.pools[1].spec: unknown field "imag"`,
		"c.yaml:15: server.pools[2].min_idel: unknown key (known: fallback, initial, max, min_idle, name, runtime, spec)",
		"c.yaml:16: server.pools[3]: must be a mapping",
	} {
		if !strings.Contains(msg, s) {
			t.Errorf("errors lack %q", s)
		}
	}

	// Problems found by validation, once decoding passed.
	file = writeFile(t, "c.yaml", `server:
  pools:
    - name: ok
    - name: "a b"
      min_idle: 3
      max: 2
      fallback: maybe
      spec:
        limits:
          pids: -3
    - name: ok
`)
	_, err = Load(LoadOptions{Getenv: env(map[string]string{"EXECBOX_CONFIG": file})})
	t.Logf("errors:\n%v", err)
	msg = err.Error()
	for _, s := range []string{
		`c.yaml:4: server.pools[1].name: "a b" is not a pool name`,
		"c.yaml:5: server.pools[1].min_idle: 3 is more than max (2)",
		`c.yaml:7: server.pools[1].fallback: unknown fallback "maybe"`,
		"c.yaml:10: server.pools[1].spec.limits.pids: must not be negative",
		`c.yaml:11: server.pools[2].name: pool "ok" is defined twice (first at server.pools[0])`,
	} {
		if !strings.Contains(msg, s) {
			t.Errorf("errors lack %q", s)
		}
	}

	file = writeFile(t, "c.yaml", "server:\n  pools: {name: x}\n  pool: []\n")
	_, err = Load(LoadOptions{Getenv: env(map[string]string{"EXECBOX_CONFIG": file})})
	for _, s := range []string{"c.yaml:2: server.pools: must be a list of pools", "c.yaml:3: server.pool: unknown key (known: hosts, ", "pools, "} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("error %v lacks %q", err, s)
		}
	}
}

// FuzzPoolsConfig: any file under server.pools decodes or fails with
// field errors, never panics.
func FuzzPoolsConfig(f *testing.F) {
	for _, s := range []string{
		"server:\n  pools:\n    - name: a\n      min_idle: 1\n      spec: {env: {A: b}}\n",
		"server:\n  pools: [{name: a, spec: {setup: [{shell: x}], limits: {pids: 3}}}, 7, null]\n",
		"server:\n  pools:\n    - &a {name: a}\n    - *a\n",
		"server:\n  pools: [{spec: {assets: [{path: x, content: {data: aGk=}}]}, max: 1e99}]\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c := Default()
		c.sources = map[string]source{}
		errs := c.decodeFile("f.yaml", []byte(s))
		if len(errs) == 0 {
			err := c.Validate()
			for _, e := range Leaves(c.Annotate(err)) {
				var fe *execbox.FieldError
				if !errors.As(e, &fe) {
					t.Fatalf("problem %v (%T) is not a field error", e, e)
				}
			}
		}
	})
}
