package devcontainer

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"reflect"
	"strings"
	"testing"

	"github.com/execbox/execbox"
)

const testFile = "/home/user/proj/.devcontainer/devcontainer.json"

func testVars() vars {
	return vars{localFolder: "/home/user/proj", localEnv: func(name string) (string, bool, error) {
		switch name {
		case "TOKEN":
			return "t0k", true, nil
		case "UNSET":
			return "", false, nil
		}
		return "", false, fmt.Errorf("%s is not allowed", name)
	}}
}

func parse(t *testing.T, src string) *config {
	t.Helper()
	c, err := parseConfig([]byte(src), testFile, testVars())
	if err != nil {
		t.Fatalf("parseConfig: %v", err)
	}
	return c
}

func TestStandardize(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a": 1}`, `{"a": 1}`},
		{"// c\n{\"a\": 1 /* x */}", "    \n{\"a\": 1        }"},
		{`{"a": [1, 2,],}`, `{"a": [1, 2 ] }`},
		{"{\"a\": 1, // trailing\n}", "{\"a\": 1" + strings.Repeat(" ", 13) + "\n}"},
		{`{"s": "// not a comment, /* nor this */", "t": "a,]"}`, `{"s": "// not a comment, /* nor this */", "t": "a,]"}`},
		{`{"e": "quote \" // still a string"}`, `{"e": "quote \" // still a string"}`},
		{"\xef\xbb\xbf{}", "   {}"},
		{"{\"a\": 1, /* c\n c */ }", "{\"a\": 1      \n      }"},
		{`[1,,]`, `[1, ]`}, // stays invalid: the decoder says so
	} {
		got, err := standardize([]byte(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("standardize(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
		if len(got) != len(tc.in) {
			t.Errorf("standardize(%q) changed the length", tc.in)
		}
	}
	if _, err := standardize([]byte(`{"a": 1 /* open`)); err == nil {
		t.Error("an unterminated comment was accepted")
	}
	var v any
	err := decodeJSONC([]byte("{\n  \"a\": 1\n  \"b\": 2\n}"), &v)
	if err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("a syntax error on line 3: %v", err)
	}
}

func TestParseConfig(t *testing.T) {
	c := parse(t, `{
		// JSONC, as the reference tools read it
		"name": "x", "$schema": "s", "customizations": {"vscode": {}},
		"build": {"dockerfile": "Dockerfile", "context": "..", "args": {"V": "${localEnv:TOKEN}", "W": "${localEnv:UNSET:dflt}"}, "target": "dev", "cacheFrom": "c:1"},
		"workspaceFolder": "/src/${localWorkspaceFolderBasename}",
		"mounts": [
			"source=${localWorkspaceFolder}/cache,target=${containerWorkspaceFolder}/cache,type=bind,consistency=cached",
			{"type": "volume", "source": "vol-${devcontainerId}", "target": "/v"},
			"type=tmpfs,target=/t,tmpfs-size=1024,tmpfs-mode=1777",
		],
		"containerEnv": {"A": "${containerWorkspaceFolderBasename}", "U": "${unknown} ${containerEnv:X}"},
		"remoteEnv": {"R": "${containerEnv:PATH}:/x", "GONE": null},
		"remoteUser": "dev", "containerUser": "root",
		"overrideCommand": false,
		"onCreateCommand": ["echo", "${localWorkspaceFolderBasename}"],
		"postCreateCommand": "npm ci && echo done",
		"postStartCommand": {"b": "two", "a": ["one"], "skip": null},
		"postAttachCommand": "",
	}`)
	id := "17lm1qiejea4sikebnfe3bsdiueeed44rk7kqhetqup8ndnjubjp" // the reference tools' for these labels
	want := &config{
		path: testFile, dir: "/home/user/proj/.devcontainer",
		build: &buildConfig{dockerfile: "/home/user/proj/.devcontainer/Dockerfile", context: "/home/user/proj",
			args: map[string]string{"V": "t0k", "W": "dflt"}, target: "dev", cacheFrom: []string{"c:1"}},
		workspaceFolder: "/src/proj", workspaceFolderSet: true,
		mounts: []mountSpec{
			{typ: "bind", source: "/home/user/proj/cache", target: "/src/proj/cache"},
			{typ: "volume", source: "vol-" + id, target: "/v"},
			{typ: "tmpfs", target: "/t", tmpSize: 1024, tmpMode: 0o1777},
		},
		containerEnv:    map[string]string{"A": "proj", "U": "${unknown} ${containerEnv:X}"},
		remoteEnv:       map[string]*string{"R": ptr("${containerEnv:PATH}:/x"), "GONE": nil},
		remoteUser:      "dev",
		containerUser:   "root",
		overrideCommand: ptr(false),
		onCreate: []lifecycleCommand{
			{key: "onCreateCommand", steps: []step{{argv: []string{"echo", "proj"}}}},
			{key: "postCreateCommand", steps: []step{{shell: "npm ci && echo done"}}},
			{key: "postStartCommand", steps: []step{{name: "a", argv: []string{"one"}}, {name: "b", shell: "two"}}},
		},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("parseConfig:\n%+v\nwant\n%+v", c, want)
	}
	if got := devcontainerID("/home/user/proj", testFile); got != id {
		t.Errorf("devcontainerID = %s, want %s", got, id)
	}

	// Defaults: the folder's mount point; the legacy keys.
	c = parse(t, `{"dockerFile": "../Dockerfile", "context": "."}`)
	if c.workspaceFolder != "/workspaces/proj" || c.workspaceFolderSet || c.build.dockerfile != "/home/user/proj/Dockerfile" || c.build.context != "/home/user/proj/.devcontainer" {
		t.Errorf("defaults: %+v %+v", c, c.build)
	}
	c = parse(t, `{"build": {"dockerfile": "Dockerfile"}}`)
	if c.build.context != "/home/user/proj/.devcontainer" {
		t.Errorf("the default context is the Dockerfile's directory: %q", c.build.context)
	}
	// What only starting a container needs: an error then, not now.
	c = parse(t, `{"features": {"x": {}}, "dockerComposeFile": "c.yml", "privileged": false, "capAdd": [], "runArgs": ["--init"], "build": {"dockerfile": "D", "options": ["--pull"]}}`)
	var fields []string
	for _, err := range c.startErrs {
		var fe *execbox.FieldError
		if errors.As(err, &fe) && errors.Is(err, execbox.ErrUnsupported) {
			fields = append(fields, fe.Field)
		}
	}
	if want := []string{"devcontainer.build.options", "devcontainer.dockerComposeFile", "devcontainer.features", "devcontainer.runArgs"}; !reflect.DeepEqual(fields, want) {
		t.Errorf("start errors name %v, want %v", fields, want)
	}
}

func ptr[T any](v T) *T { return &v }

// TestParseConfigErrors: every problem is a *FieldError naming its key,
// all at once.
func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		src    string
		fields []string
	}{
		{`{"image": 1}`, []string{"devcontainer.image"}},
		{`[]`, []string{"devcontainer"}},
		{`{"image": "a",}x`, []string{"devcontainer"}},
		{`{"imagee": "a", "remoteUser": ["x"]}`, []string{"devcontainer.imagee", "devcontainer.remoteUser"}},
		{`{"image": "a", "build": {"dockerfile": "D"}}`, []string{"devcontainer.image"}},
		{`{"build": {"context": "."}}`, []string{"devcontainer.build.dockerfile"}},
		{`{"build": {"dockerfile": "D", "options": 5, "secrets": 1}}`, []string{"devcontainer.build.options", "devcontainer.build.secrets"}},
		{`{"workspaceMount": "type=bind,source=/a,target=/b"}`, []string{"devcontainer.workspaceFolder"}},
		{`{"workspaceFolder": "relative"}`, []string{"devcontainer.workspaceFolder"}},
		{`{"mounts": ["type=bind,target=/x"]}`, []string{"devcontainer.mounts[0]"}},
		{`{"mounts": ["type=bind,source=rel,target=/x"]}`, []string{"devcontainer.mounts[0]"}},
		{`{"mounts": ["type=volume,target=/.execbox/agent"]}`, []string{"devcontainer.mounts[0]"}},
		{`{"mounts": [{"type": "bind", "source": "/a", "target": "/b", "extra": 1}]}`, []string{"devcontainer.mounts[0]"}},
		{`{"mounts": ["type=bind,source=${localEnv:SECRET},target=/x"]}`, []string{"devcontainer.mounts[0]"}},
		{`{"containerEnv": {"A=B": "x"}}`, []string{"devcontainer.containerEnv.A=B"}},
		{`{"containerEnv": {"A": "${localEnv}"}}`, []string{"devcontainer.containerEnv.A"}},
		{`{"postCreateCommand": 5, "onCreateCommand": {"a": 1}}`, []string{"devcontainer.onCreateCommand.a", "devcontainer.postCreateCommand"}},
	} {
		_, err := parseConfig([]byte(tc.src), testFile, testVars())
		got := fieldsOf(err)
		if !reflect.DeepEqual(got, tc.fields) {
			t.Errorf("parseConfig(%s): %v\nnames %v, want %v", tc.src, err, got, tc.fields)
		}
		if err != nil && !errors.Is(err, execbox.ErrInvalidArgument) {
			t.Errorf("parseConfig(%s): %v is not an invalid argument", tc.src, err)
		}
		if err != nil && !strings.Contains(err.Error(), testFile) {
			t.Errorf("parseConfig(%s): %v does not name the file", tc.src, err)
		}
	}
}

// fieldsOf lists the fields of the *FieldErrors joined in err, sorted.
func fieldsOf(err error) []string {
	var out []string
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var fe *execbox.FieldError
		if errors.As(e, &fe) {
			out = append(out, fe.Field)
		}
	}
	if err != nil {
		walk(err)
	}
	return out
}

func TestParseMountString(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want mountSpec
		err  string
	}{
		{"type=bind,source=/a,target=/b", mountSpec{typ: "bind", source: "/a", target: "/b"}, ""},
		{"src=/a,dst=/b,type=bind,readonly", mountSpec{typ: "bind", source: "/a", target: "/b", readOnly: true}, ""},
		{"source=v,target=/b,ro=false", mountSpec{typ: "volume", source: "v", target: "/b"}, ""},
		{`type=bind,"source=/a,b",target=/c`, mountSpec{typ: "bind", source: "/a,b", target: "/c"}, ""},
		{"type=volume,target=/c,volume-nocopy", mountSpec{typ: "volume", target: "/c", noCopy: true}, ""},
		{"type=bind,source=/a,target=/b,bind-propagation=shared", mountSpec{}, "bind-propagation"},
		{"type=npipe,source=/a,target=/b", mountSpec{}, "npipe"},
		{"type=tmpfs,source=/a,target=/b", mountSpec{}, "no source"},
		{"type=bind,source=/a,target=/", mountSpec{}, "not be /"},
		{"type=bind,source=/a,target=/.execbox", mountSpec{}, "execbox"},
		{"type=bind,source=/a,target=/b,readonly=maybe", mountSpec{}, "true or false"},
		{"type=bind,,target=/b", mountSpec{}, "empty field"},
	} {
		got, err := parseMountString(tc.in)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("parseMountString(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("parseMountString(%q): %v, want an error about %q", tc.in, err, tc.err)
		}
	}
}

func TestParseMetadata(t *testing.T) {
	md := parseMetadata(`[{"remoteUser": "a", "remoteEnv": {"X": "1", "Y": "2"}}, {"id": "feature"}, {"remoteUser": "b", "remoteEnv": {"Y": null}, "containerEnv": {"C": "c"}}, 5]`)
	if md.remoteUser != "b" || *md.remoteEnv["X"] != "1" || md.remoteEnv["Y"] != nil || md.containerEnv["C"] != "c" {
		t.Errorf("parseMetadata: %+v", md)
	}
	if md := parseMetadata(`{"containerUser": "u"}`); md.containerUser != "u" {
		t.Errorf("one object: %+v", md)
	}
	if md := parseMetadata(`not json`); !reflect.DeepEqual(md, metadata{}) {
		t.Errorf("garbage: %+v", md)
	}
}

func TestDockerignore(t *testing.T) {
	ig, err := parseDockerignore([]byte("# comment\nnode_modules\n*.log\n!keep.log\n/build/\n**/tmp\ndocs/**/*.md\n!docs/README.md\n"))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{
		"node_modules":            true,
		"node_modules/x/y.js":     true,
		"src/node_modules":        false, // a pattern is anchored at the context
		"a.log":                   true,
		"keep.log":                false,
		"src/a.log":               false,
		"build":                   true,
		"build/out":               true,
		"tmp":                     true,
		"a/b/tmp":                 true,
		"a/b/tmp/c":               true,
		"docs/guide/intro.md":     true,
		"docs/README.md":          false,
		"docs/x.txt":              false,
		"Dockerfile":              false,
		".devcontainer/build.log": false,
	} {
		if got := ig.ignored(name); got != want {
			t.Errorf("ignored(%q) = %v, want %v", name, got, want)
		}
	}
	if !ig.negates {
		t.Error("negates is false with ! patterns")
	}
	if _, err := parseDockerignore([]byte("[unclosed\n")); err == nil {
		t.Error("an invalid pattern was accepted")
	}
}

// FuzzParseConfig: parsing a devcontainer.json written by anyone (commands
// can write it) never panics, and what it accepts is consistent: a clean
// absolute workspace folder, mounts that pass their own check, Dockerfile
// paths that are absolute, no NUL in anything that reaches the engine or
// a command.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		`{"image": "a"}`,
		`// c
		{"build": {"dockerfile": "D", "context": "..", "args": {"A": "${localEnv:TOKEN}"},}, /* x */ "workspaceFolder": "/w"}`,
		`{"mounts": ["type=bind,source=${localWorkspaceFolder},target=/x", {"type": "volume", "target": "/v"}], "workspaceMount": "type=bind,source=/s,target=/t", "workspaceFolder": "/t"}`,
		`{"postCreateCommand": {"a": ["x", "y"], "b": "z"}, "remoteEnv": {"A": null, "B": "${containerEnv:PATH}"}}`,
		`{"features": {"f": {}}, "runArgs": ["--privileged"], "containerEnv": {"X": "${devcontainerId}"}}`,
		`{"image": "\u0000"}`,
		`{"a": "${`, `[1,]`, `{`, `"\"`, "\xef\xbb\xbf{}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		c, err := parseConfig(src, testFile, testVars())
		if err != nil {
			var fe *execbox.FieldError
			if !errors.As(err, &fe) || !strings.HasPrefix(fe.Field, "devcontainer") {
				t.Fatalf("error %v is not a *FieldError naming a devcontainer key", err)
			}
			return
		}
		if !path.IsAbs(c.workspaceFolder) || path.Clean(c.workspaceFolder) != c.workspaceFolder || c.workspaceFolder == "/" {
			t.Fatalf("workspace folder %q", c.workspaceFolder)
		}
		all := append([]mountSpec{}, c.mounts...)
		if c.workspaceMount != nil {
			all = append(all, *c.workspaceMount)
		}
		for _, m := range all {
			if m.raw != "" {
				t.Fatalf("mount %+v left unparsed", m)
			}
			if err := m.check(); err != nil {
				t.Fatalf("mount %+v accepted: %v", m, err)
			}
		}
		if b := c.build; b != nil && (!path.IsAbs(b.dockerfile) || !path.IsAbs(b.context)) {
			t.Fatalf("build paths %q %q", b.dockerfile, b.context)
		}
		b, _ := json.Marshal([]any{c.image, c.remoteUser, c.containerUser, c.containerEnv, c.remoteEnv})
		if strings.Contains(string(b), `\u0000`) {
			t.Fatalf("a NUL byte got through: %s", b)
		}
		for _, lc := range append(c.onCreate, lifecycleCommand{}) {
			for _, st := range lc.steps {
				if (st.shell == "") == (st.argv == nil) || strings.ContainsRune(st.shell+strings.Join(st.argv, ""), 0) {
					t.Fatalf("step %+v", st)
				}
			}
		}
	})
}
