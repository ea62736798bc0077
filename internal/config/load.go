package config

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/execbox/execbox"
	"go.yaml.in/yaml/v3"
)

// DefaultFile is the file Load reads when no file is named and it exists
// in the current directory.
const DefaultFile = "execbox.yaml"

// EnvFile is the environment variable naming the config file.
const EnvFile = "EXECBOX_CONFIG"

// LoadOptions say where Load finds values besides the file.
type LoadOptions struct {
	// Flags holds the flags set on the command line, including --config;
	// nil means none.
	Flags *Flags
	// Getenv reads environment variables; nil means os.Getenv.
	Getenv func(string) string
	// Dir is where DefaultFile is looked for and relative paths given by
	// variables and flags are resolved; empty means the current directory.
	Dir string
	// Environ lists the environment, for the EXECBOX_* variables of a
	// section (EXECBOX_LIMITS_...) that name no key; nil means
	// os.Environ, unless Getenv is set (then none are listed).
	Environ func() []string
	// Registry, if set, is where runtime names are looked up: Load then
	// also checks them and the runtimes' settings (ValidateRuntimes),
	// reporting their problems with the others. Nil checks neither.
	Registry *execbox.Registry
}

// source is where a key's value came from.
type source struct {
	name string // "--timeout", "EXECBOX_EXEC_TIMEOUT" or the file's path
	line int    // line in the file; 0 for a variable or flag
}

// SourceError is a problem with a value, saying where the value came from.
// It unwraps to the *execbox.FieldError, whose Field is the YAML key.
type SourceError struct {
	// Source is a flag ("--timeout"), a variable ("EXECBOX_EXEC_TIMEOUT")
	// or a file path.
	Source string
	// Line is the line in the file, or 0.
	Line int
	// Err is the problem; Err.Field is the key, e.g. "exec.timeout".
	Err *execbox.FieldError
}

// Error reads "--timeout: must not be negative" for a flag or variable, and
// "execbox.yaml:3: exec.timeout: must not be negative" for a file.
func (e *SourceError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.Source, e.Line, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Source, e.Err.Problem)
}

// Unwrap returns the *execbox.FieldError.
func (e *SourceError) Unwrap() error { return e.Err }

// Load builds the configuration from its defaults, the config file,
// EXECBOX_* variables and opts.Flags, in that order, then validates it. The
// error joins every problem found, each a *SourceError or
// *execbox.FieldError matching execbox.ErrInvalidArgument (a named file that
// does not exist matches execbox.ErrNotFound). Runtime names and settings
// are checked against opts.Registry, if set: see ValidateRuntimes.
func Load(opts LoadOptions) (*Config, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	c := Default()
	c.sources = map[string]source{}
	var errs []error

	path, from := "", ""
	switch {
	case opts.Flags != nil && opts.Flags.configSet:
		path, from = opts.Flags.config, "--config"
	case getenv(EnvFile) != "":
		path, from = getenv(EnvFile), EnvFile
	}
	switch {
	case from == "--config" && path == "":
		// --config "" asks for no file at all.
	case path != "":
		data, err := os.ReadFile(path)
		if err != nil {
			kind := error(nil)
			if errors.Is(err, fs.ErrNotExist) {
				kind = execbox.ErrNotFound
			}
			return nil, &SourceError{Source: from, Err: &execbox.FieldError{Field: "config", Problem: pathErrText(err), Kind: kind}}
		}
		errs = append(errs, c.decodeFile(path, data)...)
	default:
		p := filepath.Join(opts.Dir, DefaultFile)
		data, err := os.ReadFile(p)
		switch {
		case err == nil:
			errs = append(errs, c.decodeFile(p, data)...)
		case !errors.Is(err, fs.ErrNotExist):
			return nil, &SourceError{Source: p, Err: &execbox.FieldError{Field: "config", Problem: pathErrText(err)}}
		}
	}

	for _, f := range fields {
		if s := getenv(f.env); s != "" {
			errs = append(errs, c.setFrom(f, s, source{name: f.env}, opts.Dir))
		}
	}
	environ := opts.Environ
	if environ == nil && opts.Getenv == nil {
		environ = os.Environ
	}
	if environ != nil {
		errs = append(errs, c.unknownVariables(environ())...)
	}
	if opts.Flags != nil {
		errs = append(errs, opts.Flags.apply(c, opts.Dir)...)
	}
	errs = append(errs, c.Validate())
	if opts.Registry != nil {
		errs = append(errs, c.ValidateRuntimes(opts.Registry))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, sortProblems(c.Annotate(err))
	}
	return c, nil
}

// unknownVariables reports the set variables of environ in a section's
// namespace (EXECBOX_LIMITS_, EXECBOX_EXEC_, ...) that are no key's: a
// misspelt EXECBOX_LIMITS_MEMROY would otherwise leave a limit unset
// without a word. Top-level names (EXECBOX_TOKEN, EXECBOX_CONFIG) are
// not checked: other programs and execbox's own commands use them. The
// variable server.policy_token_env names is not a key's but allowed.
func (c *Config) unknownVariables(environ []string) []error {
	var errs []error
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if value == "" || name == c.Server.PolicyTokenEnv || fieldByEnv(name) != nil {
			continue
		}
		inSection := false
		for section := range sections {
			prefix := "EXECBOX_" + strings.ToUpper(section) + "_"
			if section != "" && strings.HasPrefix(name, prefix) {
				errs = append(errs, &SourceError{Source: name, Err: execbox.Invalid(section, "unknown variable (known: %s)", strings.Join(sectionVariables(section), ", "))})
				inSection = true
				break
			}
		}
		switch {
		case inSection:
		case strings.HasPrefix(name, "EXECBOX_RUNTIMES_"):
			errs = append(errs, &SourceError{Source: name, Err: execbox.Invalid("runtimes", "runtime settings have no variables: set runtimes.NAME.KEY in the file")})
		default:
			if near := nearVariable(name); near != "" {
				errs = append(errs, &SourceError{Source: name, Err: execbox.Invalid("config", "unknown variable; did you mean %s?", near)})
			}
		}
	}
	return errs
}

// nearVariable is the top-level variable of a key (EXECBOX_ISOLATION)
// that name misspells (EXECBOX_ISOLATON), or "". Top-level names are
// shared with others (EXECBOX_TOKEN, a test's own), so only a name
// within two edits of a key's variable is taken for a typo of it.
func nearVariable(name string) string {
	rest, ok := strings.CutPrefix(name, "EXECBOX_")
	if !ok {
		return ""
	}
	for _, f := range fields {
		if strings.Contains(f.key, ".") || f.env == "" {
			continue
		}
		known := strings.TrimPrefix(f.env, "EXECBOX_")
		if d := editDistance(rest, known); d > 0 && d <= 2 && len(known) > 4 {
			return f.env
		}
	}
	return ""
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// fieldByEnv is the field whose variable is name, or nil.
func fieldByEnv(name string) *field {
	for _, f := range fields {
		if f.env == name {
			return f
		}
	}
	return nil
}

// sectionVariables lists the variables of the keys of section.
func sectionVariables(section string) []string {
	var out []string
	for _, f := range fields {
		if strings.HasPrefix(f.key, section+".") {
			out = append(out, f.env)
		}
	}
	return out
}

// sortProblems orders the problems joined in err: those in the file by
// line, then the others by key in the order of the fields in Config.
func sortProblems(err error) error {
	type ranked struct {
		err        error
		line, rank int
	}
	var rs []ranked
	for _, e := range Leaves(err) {
		r := ranked{err: e, line: math.MaxInt, rank: len(fields)}
		var se *SourceError
		if errors.As(e, &se) && se.Line > 0 {
			r.line = se.Line
		}
		var fe *execbox.FieldError
		if errors.As(e, &fe) {
			for i, f := range fields {
				if f.key == configKey(fe.Field) {
					r.rank = i
				}
			}
		}
		rs = append(rs, r)
	}
	slices.SortStableFunc(rs, func(a, b ranked) int {
		return cmp.Or(cmp.Compare(a.line, b.line), cmp.Compare(a.rank, b.rank))
	})
	errs := make([]error, len(rs))
	for i, r := range rs {
		errs[i] = r.err
	}
	return errors.Join(errs...)
}

// pathErrText is err's text without the Op, which the user does not need.
func pathErrText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Path + ": " + pe.Err.Error()
	}
	return err.Error()
}

// setFrom parses s into f and records src; relative paths are resolved
// against dir. A value that does not parse is a *SourceError and leaves
// the field as it was.
func (c *Config) setFrom(f *field, s string, src source, dir string) error {
	if f.path && s != "" && !filepath.IsAbs(s) {
		s = filepath.Join(absDir(dir), s)
	}
	if err := f.set(c, s); err != nil {
		return &SourceError{Source: src.name, Line: src.line, Err: invalid(f.key, err)}
	}
	c.sources[f.key] = src
	return nil
}

func absDir(dir string) string {
	if a, err := filepath.Abs(dir); err == nil {
		return a
	}
	return dir
}

// decodeFile applies a YAML document to c, reporting every unknown key and
// bad value with its line.
func (c *Config) decodeFile(path string, data []byte) []error {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // empty file
		}
		return []error{syntaxError(path, err)}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return []error{&SourceError{Source: path, Line: extra.Line, Err: execbox.Invalid("config", "holds more than one YAML document")}}
	}
	d := fileDecoder{c: c, path: path, dir: filepath.Dir(path)}
	if len(doc.Content) > 0 {
		d.mapping("", doc.Content[0])
	}
	return d.errs
}

// syntaxError is a YAML parser's error as file:line: config: problem.
func syntaxError(path string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, after, ok := strings.Cut(rest, ": "); ok {
			if l, err := strconv.Atoi(n); err == nil && l > 0 {
				line, msg = l, after
			}
		}
	}
	return &SourceError{Source: path, Line: line, Err: execbox.Invalid("config", "%s", msg)}
}

type fileDecoder struct {
	c    *Config
	path string
	dir  string
	errs []error
}

func (d *fileDecoder) fail(n *yaml.Node, key, format string, args ...any) {
	d.errs = append(d.errs, &SourceError{Source: d.path, Line: n.Line, Err: execbox.Invalid(key, format, args...)})
}

func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// isNull reports whether n is YAML's null: empty, ~ or null. A value
// tagged !!null that says something else ("!!null require") is not
// dropped as null: its text is what the reader of the file sees.
func isNull(n *yaml.Node) bool {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!null" {
		return false
	}
	switch n.Value {
	case "", "~", "null", "Null", "NULL":
		return true
	}
	return false
}

// plainKey reports, as a problem of d, a key that is not a plain scalar:
// an alias used as a key reads as its anchor's name ("*runtime : local"
// would set runtime without a runtime: line anywhere).
func (d *fileDecoder) plainKey(prefix string, kn *yaml.Node) bool {
	if kn.Kind == yaml.ScalarNode {
		return true
	}
	section := strings.TrimSuffix(prefix, ".")
	if section == "" {
		section = "config"
	}
	d.fail(kn, section, "a key must be a plain name (not an alias, a list or a mapping)")
	return false
}

// mapping applies the mapping n found at section prefix ("" for the top).
func (d *fileDecoder) mapping(prefix string, n *yaml.Node) {
	n = resolve(n)
	name := strings.TrimSuffix(prefix, ".")
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		if name == "" {
			name = "config"
		}
		d.fail(n, name, "must be a mapping of keys to values")
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], resolve(n.Content[i+1])
		if !d.plainKey(prefix, kn) {
			continue
		}
		key := prefix + kn.Value
		if line, dup := seen[kn.Value]; dup {
			d.fail(kn, key, "set twice (first at line %d)", line)
			continue
		}
		seen[kn.Value] = kn.Line
		switch {
		case key == "runtimes":
			d.runtimes(vn)
		case key == "server.keys":
			d.keys(vn)
		case key == "server.pools":
			d.pools(vn)
		case sections[key]:
			d.mapping(key+".", vn)
		case fieldByKey(key) != nil:
			d.leaf(fieldByKey(key), vn)
		default:
			d.fail(kn, key, "unknown key (known: %s)", strings.Join(knownKeys(name), ", "))
		}
	}
}

// knownKeys lists the keys allowed directly in section.
func knownKeys(section string) []string {
	var keys []string
	add := func(k string) {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	prefix := section + "."
	if section == "" {
		prefix = ""
		add("runtimes")
	}
	if section == "server" {
		add("keys") // decoded by fileDecoder.keys
	}
	for _, f := range fields {
		if rest, ok := strings.CutPrefix(f.key, prefix); ok {
			k, _, _ := strings.Cut(rest, ".")
			add(k)
		}
	}
	for key := range customKeys {
		if rest, ok := strings.CutPrefix(key, prefix); ok && !strings.Contains(rest, ".") {
			add(rest)
		}
	}
	slices.Sort(keys)
	return keys
}

func (d *fileDecoder) leaf(f *field, n *yaml.Node) {
	if isNull(n) {
		return
	}
	src := source{name: d.path, line: n.Line}
	if f.isList() {
		if n.Kind != yaml.SequenceNode {
			d.fail(n, f.key, "must be a list, e.g. [A, B]")
			return
		}
		var items []string
		for _, e := range n.Content {
			e = resolve(e)
			if e.Kind != yaml.ScalarNode {
				d.fail(e, f.key, "must be a list of single values")
				return
			}
			items = append(items, e.Value)
		}
		if err := f.setList(d.c, items); err != nil {
			d.fail(n, f.key, "%v", err)
			return
		}
		d.c.sources[f.key] = src
		return
	}
	if n.Kind != yaml.ScalarNode {
		d.fail(n, f.key, "must be a single value")
		return
	}
	if err := d.c.setFrom(f, n.Value, src, d.dir); err != nil {
		d.errs = append(d.errs, err)
	}
}

func (d *fileDecoder) runtimes(n *yaml.Node) {
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.fail(n, "runtimes", "must be a mapping of runtime names to settings")
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], resolve(n.Content[i+1])
		if !d.plainKey("runtimes.", kn) {
			continue
		}
		key := "runtimes." + kn.Value
		if _, dup := d.c.Runtimes[kn.Value]; dup {
			d.fail(kn, key, "set twice")
			continue
		}
		settings := map[string]any{}
		if !isNull(vn) {
			if vn.Kind != yaml.MappingNode {
				d.fail(vn, key, "must be a mapping of settings")
				continue
			}
			if err := vn.Decode(&settings); err != nil {
				d.fail(vn, key, "%s", strings.TrimPrefix(err.Error(), "yaml: "))
				continue
			}
			// Each setting's line, for the runtime's own checks
			// (ValidateRuntimes) to be reported where the key is.
			for j := 0; j+1 < len(vn.Content); j += 2 {
				d.c.sources[key+"."+vn.Content[j].Value] = source{name: d.path, line: vn.Content[j].Line}
			}
		}
		if d.c.Runtimes == nil {
			d.c.Runtimes = map[string]map[string]any{}
		}
		d.c.Runtimes[kn.Value] = settings
		d.c.sources[key] = source{name: d.path, line: kn.Line}
	}
}

// Annotate rewrites every *execbox.FieldError in err that concerns a value
// of c set by the file, a variable or a flag into a *SourceError saying
// where it came from, so "limits.memory: not supported by the local
// runtime" becomes "--memory: not supported by the local runtime". It
// understands both config keys ("exec.timeout") and the field names of
// execbox.ExecRequest and execbox.Spec built from c ("timeout",
// "env_policy", "limits.memory"). Other errors are kept as they are.
func (c *Config) Annotate(err error) error {
	if err == nil {
		return nil
	}
	var out []error
	for _, e := range Leaves(err) {
		var fe *execbox.FieldError
		var se *SourceError
		if errors.As(e, &se) || !errors.As(e, &fe) {
			out = append(out, e)
			continue
		}
		field := configKey(fe.Field) + strings.TrimPrefix(fe.Field, trimIndex(fe.Field))
		if key, ok := c.injectedKey(fe.Field); ok {
			field = key
			if strings.HasPrefix(fe.Problem, "unknown key") {
				// A runtime without the setting at all.
				name, _, _ := strings.Cut(strings.TrimPrefix(fe.Field, "runtimes."), ".")
				fe = &execbox.FieldError{Field: fe.Field, Problem: fmt.Sprintf("not supported by the %s runtime", name), Kind: execbox.ErrUnsupported}
			}
		}
		src, ok := c.source(field)
		if !ok {
			out = append(out, e)
			continue
		}
		fe = &execbox.FieldError{Field: field, Problem: fe.Problem, Kind: fe.Kind}
		out = append(out, &SourceError{Source: src.name, Line: src.line, Err: fe})
	}
	return errors.Join(out...)
}

// Leaves lists the problems in err, each one line's worth: the errors
// joined in it (by errors.Join), and in an error that wraps several
// while saying something of its own (an error of the HTTP API wraps its
// kind and its fields; package image's, a kind and a cause) those that
// are not a bare kind, or err itself when only kinds remain. A bare kind
// says nothing worth a line of its own ("not found" above the field
// error that says what was not found).
func Leaves(err error) []error {
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	errs := j.Unwrap()
	if !isJoin(err, errs) {
		errs = slices.DeleteFunc(slices.Clone(errs), func(e error) bool { return e == nil || slices.Contains(kinds, e) })
		if len(errs) == 0 {
			return []error{err}
		}
	}
	var out []error
	for _, e := range errs {
		out = append(out, Leaves(e)...)
	}
	return out
}

// kinds are the error kinds of package execbox, and the context's.
var kinds = []error{execbox.ErrInvalidArgument, execbox.ErrNotFound, execbox.ErrClosed, execbox.ErrUnavailable,
	execbox.ErrUnsupported, execbox.ErrResourceExhausted, execbox.ErrPermission, context.Canceled, context.DeadlineExceeded}

// isJoin reports whether err's message is its errs', one a line, as
// errors.Join makes it.
func isJoin(err error, errs []error) bool {
	var msgs []string
	for _, e := range errs {
		if e != nil {
			msgs = append(msgs, e.Error())
		}
	}
	return err.Error() == strings.Join(msgs, "\n")
}

// requestKeys maps field names of execbox.ExecRequest and execbox.Spec to
// the config keys they come from.
var requestKeys = map[string]string{
	"timeout":      "exec.timeout",
	"grace_period": "exec.grace_period",
	"output_limit": "exec.output_limit",
	"env_policy":   "exec.env_policy",
	"env_allow":    "exec.env_allow",
}

// source is where the value of field came from: the entry of a list of
// mappings (server.pools[1].min_idle) that holds it, the setting of a
// runtime (runtimes.NAME.KEY, or its section) that holds it, or its key.
func (c *Config) source(field string) (source, bool) {
	for k := field; strings.Contains(k, "["); k = parentKey(k) {
		if src, ok := c.sources[k]; ok {
			return src, true
		}
	}
	if strings.HasPrefix(field, "runtimes.") {
		for k := field; strings.Count(k, ".") >= 1; k = parentKey(k) {
			if src, ok := c.sources[trimIndex(k)]; ok {
				return src, true
			}
		}
	}
	src, ok := c.sources[configKey(field)]
	return src, ok
}

// injectedKey is the config key whose value RuntimeOptions put in the
// runtime setting field (runtimes.NAME.network is network when that is
// set), if it did.
func (c *Config) injectedKey(field string) (string, bool) {
	rest, ok := strings.CutPrefix(field, "runtimes.")
	if !ok {
		return "", false
	}
	name, setting, ok := strings.Cut(rest, ".")
	if !ok {
		return "", false
	}
	switch {
	case setting == "network" && c.Network != "":
		return "network", true
	case setting == "workspace_size" && c.WorkspaceSize != 0:
		return "workspace_size", true
	case name == "sandbox" && setting == "image_dir" && c.Images.Dir != "":
		return "images.dir", true
	case name == "sandbox" && setting == "image_max_size" && c.Images.MaxSize != 0:
		return "images.max_size", true
	}
	return "", false
}

// parentKey drops the last ".name" or "[i]" of key.
func parentKey(key string) string {
	return key[:max(strings.LastIndexByte(key, '.'), strings.LastIndexByte(key, '['), 0)]
}

// configKey maps a field name (with any [index] dropped) to its config key.
func configKey(field string) string {
	f := trimIndex(field)
	if k, ok := requestKeys[f]; ok {
		return k
	}
	return f
}

func trimIndex(field string) string {
	if i := strings.IndexByte(field, '['); i >= 0 {
		return field[:i]
	}
	return field
}
