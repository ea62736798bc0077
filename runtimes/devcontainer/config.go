package devcontainer

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/execbox/execbox"
)

// config is what execbox takes of a devcontainer.json, with its variables
// substituted (see vars).
type config struct {
	path string // the file, absolute
	dir  string // its directory

	image string       // "image"
	build *buildConfig // "build" (or the legacy "dockerFile" and "context")

	// workspaceFolder is where commands start in the container: the
	// file's (workspaceFolderSet), else the folder's mount point.
	workspaceFolder    string
	workspaceFolderSet bool
	// workspaceMount is the file's; nil: the folder bound at
	// /workspaces/<basename>.
	workspaceMount *mountSpec
	mounts         []mountSpec
	containerEnv   map[string]string
	// remoteEnv: a nil value unsets the variable.
	remoteEnv       map[string]*string
	remoteUser      string
	containerUser   string
	overrideCommand *bool

	// onCreate is run once, in this order, when the runtime starts the
	// container: onCreateCommand, updateContentCommand,
	// postCreateCommand, postStartCommand.
	onCreate []lifecycleCommand
	// postAttach is run at every Create.
	postAttach *lifecycleCommand

	// startErrs are the keys that keep the runtime from starting a
	// container from this file (features, dockerComposeFile, ...); they
	// do not matter when one is found running.
	startErrs []error
}

// buildConfig is "build": an image built from a Dockerfile.
type buildConfig struct {
	dockerfile string // host path, absolute
	context    string // host path, absolute
	args       map[string]string
	target     string
	cacheFrom  []string
}

// lifecycleCommand is one of the *Command keys: a shell string (the one
// form the spec defines as one, run with /bin/sh -c), an argv, or named
// steps of either form run in parallel.
type lifecycleCommand struct {
	key   string
	steps []step
}

type step struct {
	name  string   // the object form's key, "" otherwise
	shell string   // a /bin/sh -c script, or
	argv  []string // a program and its arguments, no shell
}

// vars are what the variables of a devcontainer.json stand for.
type vars struct {
	// localFolder is the workspace folder on the host, absolute.
	localFolder string
	// localEnv looks up ${localEnv:NAME} (and ${env:NAME}); an error
	// refuses the name.
	localEnv func(name string) (string, bool, error)
}

// Keys of devcontainer.json that execbox takes no action on, and why
// (README: "devcontainer.json").
var ignoredKeys = map[string]string{
	"$schema":                     "editor metadata",
	"name":                        "a display name",
	"forwardPorts":                "a tool's port forwarding; commands reach the container's ports from inside",
	"portsAttributes":             "a tool's port forwarding",
	"otherPortsAttributes":        "a tool's port forwarding",
	"customizations":              "tool-specific settings",
	"extensions":                  "tool-specific settings (deprecated)",
	"settings":                    "tool-specific settings (deprecated)",
	"hostRequirements":            "advisory",
	"secrets":                     "recommendations to tools",
	"waitFor":                     "execbox waits for every lifecycle command",
	"shutdownAction":              "runtimes.devcontainer.keep decides",
	"updateRemoteUserUID":         "execbox runs as root, for which the reference tools skip it too",
	"userEnvProbe":                "commands get the container's environment and remoteEnv, not a login shell's",
	"init":                        "execbox always runs Docker's init in a container it starts",
	"devPort":                     "deprecated",
	"overrideFeatureInstallOrder": "features are not supported",
}

// startOnlyKeys are keys whose effect execbox does not implement: a
// container needing them cannot be started by it, only found running
// (made by the reference tools).
var startOnlyKeys = map[string]string{
	"features":          "features are not supported: build the image with them first (devcontainer build --image-name NAME) and set \"image\" to it, or start the container with the reference tools (devcontainer up), which this runtime then finds",
	"dockerComposeFile": "Docker Compose is not supported: start the services with the reference tools (devcontainer up), which this runtime then finds",
	"service":           "Docker Compose is not supported",
	"runServices":       "Docker Compose is not supported",
	"appPort":           "publishing ports is not supported",
	"runArgs":           "docker run flags are not supported: they are not a Docker Engine API, and could undo the container's boundary from a file commands can write",
	"privileged":        "a privileged container is not started from a file commands can write",
	"capAdd":            "capabilities are not added from a file commands can write",
	"securityOpt":       "security options are not set from a file commands can write",
	"initializeCommand": "a command run on the host from a file commands can write is not run",
}

// lifecycleKeys are the lifecycle commands run in a container the runtime
// starts, in order.
var lifecycleKeys = []string{"onCreateCommand", "updateContentCommand", "postCreateCommand", "postStartCommand"}

// parseConfig parses devcontainer.json src, at path, and substitutes its
// variables. Problems are *execbox.FieldErrors naming the key
// ("devcontainer.build.dockerfile"), all at once.
func parseConfig(src []byte, file string, v vars) (*config, error) {
	p := parser{file: file}
	var doc json.RawMessage
	if err := decodeJSONC(src, &doc); err != nil {
		return nil, p.invalid("", "%v", err)
	}
	var top map[string]json.RawMessage
	if !bytes.HasPrefix(bytes.TrimSpace(doc), []byte("{")) || json.Unmarshal(doc, &top) != nil {
		return nil, p.invalid("", "is not a JSON object")
	}
	c := &config{path: file, dir: filepath.Dir(file)}
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var dockerFile, context string // legacy keys
	lifecycle := map[string]*lifecycleCommand{}
	for _, k := range keys {
		raw := top[k]
		switch k {
		case "image":
			c.image = p.str(k, raw)
		case "build":
			c.build = p.build(k, raw, c.dir)
		case "dockerFile":
			dockerFile = p.str(k, raw)
		case "context":
			context = p.str(k, raw)
		case "workspaceFolder":
			c.workspaceFolder = p.str(k, raw)
		case "workspaceMount":
			if s := p.str(k, raw); s != "" {
				c.workspaceMount = &mountSpec{raw: s}
			}
		case "mounts":
			c.mounts = p.mounts(k, raw)
		case "containerEnv":
			c.containerEnv = p.strMap(k, raw)
		case "remoteEnv":
			c.remoteEnv = p.nullableStrMap(k, raw)
		case "remoteUser":
			c.remoteUser = p.str(k, raw)
		case "containerUser":
			c.containerUser = p.str(k, raw)
		case "overrideCommand":
			var b bool
			if p.decode(k, raw, &b, "must be true or false") {
				c.overrideCommand = &b
			}
		case "onCreateCommand", "updateContentCommand", "postCreateCommand", "postStartCommand", "postAttachCommand":
			lifecycle[k] = p.lifecycle(k, raw)
		default:
			if why, ok := startOnlyKeys[k]; ok {
				if !isEmpty(raw) {
					p.start = append(p.start, p.unsupported(k, "%s", why))
				}
				continue
			}
			if _, ok := ignoredKeys[k]; ok {
				continue
			}
			p.errs = append(p.errs, p.invalid(k, "is not a devcontainer.json key the devcontainer runtime knows (a typo?)"))
		}
	}
	if dockerFile != "" {
		if c.build != nil {
			p.errs = append(p.errs, p.invalid("dockerFile", "is set together with build: keep build.dockerfile"))
		} else {
			c.build = &buildConfig{dockerfile: dockerFile, context: context}
		}
	} else if context != "" {
		p.errs = append(p.errs, p.invalid("context", "is set without dockerFile"))
	}
	if c.image != "" && c.build != nil {
		p.errs = append(p.errs, p.invalid("image", "is set together with a Dockerfile (build.dockerfile): keep one"))
	}
	if c.build != nil && c.build.dockerfile == "" {
		p.errs = append(p.errs, p.invalid("build.dockerfile", "is required with build"))
	}
	if c.workspaceMount != nil && c.workspaceFolder == "" {
		p.errs = append(p.errs, p.invalid("workspaceFolder", "is required with workspaceMount"))
	}
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	c.startErrs = p.start
	for _, k := range lifecycleKeys {
		if lc := lifecycle[k]; lc != nil {
			c.onCreate = append(c.onCreate, *lc)
		}
	}
	c.postAttach = lifecycle["postAttachCommand"]
	if err := c.substitute(&p, v); err != nil {
		return nil, err
	}
	return c, nil
}

// substitute replaces the variables of every string execbox uses, as the
// reference tools do: ${localWorkspaceFolder},
// ${localWorkspaceFolderBasename}, ${containerWorkspaceFolder},
// ${containerWorkspaceFolderBasename}, ${localEnv:NAME[:default]} (and
// ${env:...}) and ${devcontainerId}; others are left as they are
// (${containerEnv:NAME} is remoteEnv's, substituted once the container
// runs). It resolves the build's paths and the workspace folder's
// default.
func (c *config) substitute(p *parser, v vars) error {
	s := substituter{local: v.localFolder, env: v.localEnv, id: devcontainerID(v.localFolder, c.path)}
	str := func(key string, ps *string) {
		out, err := s.replace(*ps)
		if err != nil {
			p.errs = append(p.errs, p.invalid(key, "%v", err))
		}
		*ps = out
	}
	// The workspace folder first: the others may name it.
	mountFolder := "/workspaces/" + filepath.Base(v.localFolder)
	if c.workspaceFolder != "" {
		c.workspaceFolderSet = true
		str("workspaceFolder", &c.workspaceFolder)
	} else {
		c.workspaceFolder = mountFolder
	}
	if !path.IsAbs(c.workspaceFolder) || path.Clean(c.workspaceFolder) != c.workspaceFolder || c.workspaceFolder == "/" {
		p.errs = append(p.errs, p.invalid("workspaceFolder", "%q is not a clean absolute path other than /", c.workspaceFolder))
	}
	s.container = c.workspaceFolder
	str("image", &c.image)
	if b := c.build; b != nil {
		str("build.dockerfile", &b.dockerfile)
		str("build.context", &b.context)
		str("build.target", &b.target)
		for k := range b.args {
			val := b.args[k]
			str("build.args."+k, &val)
			b.args[k] = val
		}
		for i := range b.cacheFrom {
			str(fmt.Sprintf("build.cacheFrom[%d]", i), &b.cacheFrom[i])
		}
		// Paths are relative to the file's directory; the context is,
		// by default, the Dockerfile's.
		b.dockerfile = filepath.Join(c.dir, b.dockerfile)
		if b.context == "" {
			b.context = filepath.Dir(b.dockerfile)
		} else {
			b.context = filepath.Join(c.dir, b.context)
		}
	}
	// Mount strings are parsed once substituted, as the reference tools
	// do: a value may hold commas.
	mount := func(key string, m *mountSpec) {
		if m.raw != "" {
			n := len(p.errs)
			if str(key, &m.raw); len(p.errs) > n {
				return
			}
			parsed, err := parseMountString(m.raw)
			if err != nil {
				p.errs = append(p.errs, p.invalid(key, "%v", err))
				return
			}
			*m = parsed
			return
		}
		str(key, &m.source)
		str(key, &m.target)
		if err := m.check(); err != nil {
			p.errs = append(p.errs, p.invalid(key, "%v", err))
		}
	}
	if m := c.workspaceMount; m != nil {
		mount("workspaceMount", m)
	}
	for i := range c.mounts {
		mount(fmt.Sprintf("mounts[%d]", i), &c.mounts[i])
	}
	for k, val := range c.containerEnv {
		str("containerEnv."+k, &val)
		c.containerEnv[k] = val
	}
	for k, val := range c.remoteEnv {
		if val != nil {
			str("remoteEnv."+k, val)
		}
	}
	str("remoteUser", &c.remoteUser)
	str("containerUser", &c.containerUser)
	cmds := slices.Clone(c.onCreate)
	if c.postAttach != nil {
		cmds = append(cmds, *c.postAttach)
	}
	for _, lc := range cmds {
		for i := range lc.steps {
			st := &lc.steps[i]
			str(lc.key, &st.shell)
			for j := range st.argv {
				str(lc.key, &st.argv[j])
			}
		}
	}
	if len(p.errs) > 0 {
		return errors.Join(p.errs...)
	}
	return nil
}

// substituter replaces ${...} variables (see config.substitute).
type substituter struct {
	local     string // the workspace folder on the host
	container string // in the container ("" until known)
	id        string // ${devcontainerId}
	env       func(string) (string, bool, error)
	// containerEnv, if set, replaces ${containerEnv:NAME[:default]}.
	containerEnv map[string]string
}

func (s *substituter) replace(in string) (string, error) {
	var out strings.Builder
	for {
		i := strings.Index(in, "${")
		if i < 0 {
			out.WriteString(in)
			return out.String(), nil
		}
		j := strings.IndexByte(in[i+2:], '}')
		if j < 0 {
			out.WriteString(in)
			return out.String(), nil
		}
		match, inner := in[i:i+2+j+1], in[i+2:i+2+j]
		out.WriteString(in[:i])
		in = in[i+2+j+1:]
		name, args, _ := strings.Cut(inner, ":")
		var argv []string
		if strings.Contains(inner, ":") {
			argv = strings.Split(args, ":")
		}
		lookup := func(get func(string) (string, bool, error)) error {
			if len(argv) == 0 || argv[0] == "" {
				return fmt.Errorf("%s names no variable", match)
			}
			val, ok, err := get(argv[0])
			if err != nil {
				return err
			}
			if !ok && len(argv) > 1 {
				val = argv[1]
			}
			out.WriteString(val)
			return nil
		}
		var err error
		switch {
		case name == "localEnv" || name == "env":
			if s.env == nil {
				err = fmt.Errorf("%s: the host's environment is not available here", match)
				break
			}
			err = lookup(s.env)
		case name == "containerEnv" && s.containerEnv != nil:
			err = lookup(func(n string) (string, bool, error) { v, ok := s.containerEnv[n]; return v, ok, nil })
		case name == "localWorkspaceFolder" && argv == nil:
			out.WriteString(s.local)
		case name == "localWorkspaceFolderBasename" && argv == nil:
			out.WriteString(filepath.Base(s.local))
		case name == "containerWorkspaceFolder" && argv == nil && s.container != "":
			out.WriteString(s.container)
		case name == "containerWorkspaceFolderBasename" && argv == nil && s.container != "":
			out.WriteString(path.Base(s.container))
		case name == "devcontainerId" && argv == nil && s.id != "":
			out.WriteString(s.id)
		default:
			out.WriteString(match)
		}
		if err != nil {
			return "", err
		}
	}
}

// devcontainerID is ${devcontainerId}, computed as the reference tools do
// from the labels that identify the container: the SHA-256 of their JSON
// (keys sorted) as a base-32 number of 52 digits.
func devcontainerID(folder, configFile string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]string{labelConfigFile: configFile, labelLocalFolder: folder})
	sum := sha256.Sum256(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	s := new(big.Int).SetBytes(sum[:]).Text(32)
	return strings.Repeat("0", max(0, 52-len(s))) + s
}

// The labels by which the reference tools (and this runtime) find a
// folder's container.
const (
	labelLocalFolder = "devcontainer.local_folder"
	labelConfigFile  = "devcontainer.config_file"
	labelMetadata    = "devcontainer.metadata"
)

// parser decodes the keys of one file, collecting problems.
type parser struct {
	file  string
	errs  []error
	start []error // what keeps a container from being started (config.startErrs)
}

func (p *parser) invalid(key, format string, a ...any) *execbox.FieldError {
	return &execbox.FieldError{Field: fieldName(key), Problem: fmt.Sprintf(format, a...) + " (in " + p.file + ")"}
}

func (p *parser) unsupported(key, format string, a ...any) *execbox.FieldError {
	fe := p.invalid(key, format, a...)
	fe.Kind = execbox.ErrUnsupported
	return fe
}

// fieldName is the *execbox.FieldError field of a devcontainer.json key.
func fieldName(key string) string {
	if key == "" {
		return "devcontainer"
	}
	return "devcontainer." + key
}

// decode decodes raw into v, or records problem.
func (p *parser) decode(key string, raw json.RawMessage, v any, problem string) bool {
	if err := json.Unmarshal(raw, v); err != nil {
		p.errs = append(p.errs, p.invalid(key, "%s", problem))
		return false
	}
	return true
}

func (p *parser) str(key string, raw json.RawMessage) string {
	var s *string
	if !p.decode(key, raw, &s, "must be a string") || s == nil {
		return ""
	}
	if strings.IndexByte(*s, 0) >= 0 {
		p.errs = append(p.errs, p.invalid(key, "contains a NUL byte"))
		return ""
	}
	return *s
}

func (p *parser) strMap(key string, raw json.RawMessage) map[string]string {
	var m map[string]string
	if !p.decode(key, raw, &m, "must be an object of strings") {
		return nil
	}
	p.checkEnv(key, m)
	return m
}

func (p *parser) nullableStrMap(key string, raw json.RawMessage) map[string]*string {
	var m map[string]*string
	if !p.decode(key, raw, &m, "must be an object of strings (or null, to unset one)") {
		return nil
	}
	for k, v := range m {
		if v != nil {
			p.checkEnv(key, map[string]string{k: *v})
		} else {
			p.checkEnv(key, map[string]string{k: ""})
		}
	}
	return m
}

// checkEnv refuses names and values an environment cannot hold.
func (p *parser) checkEnv(key string, m map[string]string) {
	for k, v := range m {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			p.errs = append(p.errs, p.invalid(key+"."+k, "is not an environment variable (a name with = or NUL, or a value with NUL)"))
		}
	}
}

func (p *parser) build(key string, raw json.RawMessage, dir string) *buildConfig {
	var top map[string]json.RawMessage
	if !p.decode(key, raw, &top, "must be an object") || top == nil {
		return nil
	}
	b := &buildConfig{}
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v, sub := top[k], key+"."+k
		switch k {
		case "dockerfile", "dockerFile":
			b.dockerfile = p.str(sub, v)
		case "context":
			b.context = p.str(sub, v)
		case "target":
			b.target = p.str(sub, v)
		case "args":
			b.args = p.strMap(sub, v)
		case "cacheFrom":
			var one string
			if json.Unmarshal(v, &one) == nil {
				if one != "" {
					b.cacheFrom = []string{one}
				}
			} else {
				p.decode(sub, v, &b.cacheFrom, "must be a string or an array of strings")
			}
		case "options":
			var opts []string
			if p.decode(sub, v, &opts, "must be an array of strings") && len(opts) > 0 {
				p.start = append(p.start, p.unsupported(sub, "docker build flags are not supported (the image is built through the Engine API)"))
			}
		default:
			p.errs = append(p.errs, p.invalid(sub, "is not a build key the devcontainer runtime knows (dockerfile, context, args, target, cacheFrom)"))
		}
	}
	return b
}

func (p *parser) mounts(key string, raw json.RawMessage) []mountSpec {
	var list []json.RawMessage
	if !p.decode(key, raw, &list, "must be an array of mount strings or objects") {
		return nil
	}
	var out []mountSpec
	for i, item := range list {
		sub := fmt.Sprintf("%s[%d]", key, i)
		var s string
		if json.Unmarshal(item, &s) == nil {
			if s == "" || strings.IndexByte(s, 0) >= 0 {
				p.errs = append(p.errs, p.invalid(sub, "is empty or contains a NUL byte"))
				continue
			}
			out = append(out, mountSpec{raw: s}) // parsed once substituted
			continue
		}
		var obj struct {
			Type   string `json:"type"`
			Source string `json:"source"`
			Target string `json:"target"`
		}
		dec := json.NewDecoder(bytes.NewReader(item))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&obj); err != nil {
			p.errs = append(p.errs, p.invalid(sub, "must be a mount string (type=bind,source=...,target=...) or an object of type, source and target: %v", err))
			continue
		}
		out = append(out, mountSpec{typ: obj.Type, source: obj.Source, target: obj.Target})
	}
	return out
}

func (p *parser) lifecycle(key string, raw json.RawMessage) *lifecycleCommand {
	lc := &lifecycleCommand{key: key}
	one := func(sub, name string, raw json.RawMessage) {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			if strings.TrimSpace(s) != "" {
				lc.steps = append(lc.steps, step{name: name, shell: s})
			}
			return
		}
		var argv []string
		if p.decode(sub, raw, &argv, "must be a string (a /bin/sh script), an array of strings (a program and its arguments) or an object of those") {
			if slices.ContainsFunc(argv, func(a string) bool { return strings.IndexByte(a, 0) >= 0 }) {
				p.errs = append(p.errs, p.invalid(sub, "contains a NUL byte"))
			} else if len(argv) > 0 {
				lc.steps = append(lc.steps, step{name: name, argv: argv})
			}
		}
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) == nil && obj != nil {
		names := make([]string, 0, len(obj))
		for n := range obj {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			if string(obj[n]) != "null" {
				one(key+"."+n, n, obj[n])
			}
		}
	} else if string(raw) != "null" {
		one(key, "", raw)
	}
	if len(lc.steps) == 0 {
		return nil
	}
	return lc
}

// isEmpty reports whether raw is a value that asks for nothing: null,
// false, "", [] or {}.
func isEmpty(raw json.RawMessage) bool {
	switch string(bytes.TrimSpace(raw)) {
	case "null", "false", `""`, "[]", "{}":
		return true
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return false
	}
	switch v := v.(type) {
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return false
}

// metadata is what execbox takes of a devcontainer.metadata label (an
// image's, written by the reference tools' builds, or a container's):
// defaults under devcontainer.json's own.
type metadata struct {
	remoteUser    string
	containerUser string
	remoteEnv     map[string]*string
	containerEnv  map[string]string
}

// parseMetadata merges the entries of a devcontainer.metadata label (an
// array of objects, or one), later ones over earlier ones, as the
// reference tools merge them. Entries or fields of other shapes are
// skipped: a label is no one's to get wrong in a way that stops work.
func parseMetadata(label string) metadata {
	var md metadata
	if label == "" {
		return md
	}
	var raw []json.RawMessage
	if json.Unmarshal([]byte(label), &raw) != nil {
		raw = []json.RawMessage{json.RawMessage(label)}
	}
	for _, r := range raw {
		var e map[string]json.RawMessage
		if json.Unmarshal(r, &e) != nil {
			continue
		}
		var s string
		if json.Unmarshal(e["remoteUser"], &s) == nil && s != "" {
			md.remoteUser = s
		}
		if json.Unmarshal(e["containerUser"], &s) == nil && s != "" {
			md.containerUser = s
		}
		var re map[string]*string
		if json.Unmarshal(e["remoteEnv"], &re) == nil {
			if md.remoteEnv == nil {
				md.remoteEnv = map[string]*string{}
			}
			for k, v := range re {
				md.remoteEnv[k] = v
			}
		}
		var ce map[string]string
		if json.Unmarshal(e["containerEnv"], &ce) == nil {
			if md.containerEnv == nil {
				md.containerEnv = map[string]string{}
			}
			for k, v := range ce {
				md.containerEnv[k] = v
			}
		}
	}
	return md
}
