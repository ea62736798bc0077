package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/execbox/execbox"
	"go.yaml.in/yaml/v3"
)

// MinKeyLength is the fewest bytes of a key given in clear (key): a
// shorter one could be guessed. execbox serve's generated tokens have 64.
const MinKeyLength = 16

// Key is one API key of execbox serve: a tenant, owning the sandboxes it
// creates. It is an entry of server.keys or of the file
// server.keys_file names, in YAML or JSON:
//
//   - name: alice
//     key_sha256: 5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8
//     max_sandboxes: 4
//     max_memory: 2GiB
//   - name: ops
//     key: a-long-random-secret
//     admin: true
type Key struct {
	// Name names the tenant: 1 to 64 of A-Z a-z 0-9 . _ -.
	Name string `yaml:"name"`
	// Key is the bearer token in clear; KeySHA256 its SHA-256 in hex,
	// so the file need not hold the secret. Exactly one is set. A file
	// holding a Key must be readable by its owner alone.
	Key       string `yaml:"key"`
	KeySHA256 string `yaml:"key_sha256"`
	// Admin keys see and manage every sandbox and the image store.
	Admin bool `yaml:"admin"`
	// The key's maximums, within the server's server.max_*; 0 means the
	// server's.
	MaxSandboxes int64         `yaml:"max_sandboxes"`
	MaxMemory    Size          `yaml:"max_memory"`
	MaxPIDs      int64         `yaml:"max_pids"`
	MaxCPUs      float64       `yaml:"max_cpus"`
	MaxCPUTime   time.Duration `yaml:"max_cpu_time"`
	// MaxResultMemory bounds what the server holds for the key's
	// requests at once (results not yet read, file contents); 0 means
	// half of server.max_result_memory (all of it for an admin key).
	MaxResultMemory Size `yaml:"max_result_memory"`
}

// SHA256 returns the SHA-256 of the key: of Key, or KeySHA256 decoded
// (zero if it is malformed; Validate refuses that).
func (k *Key) SHA256() [sha256.Size]byte {
	if k.Key != "" {
		return sha256.Sum256([]byte(k.Key))
	}
	var sum [sha256.Size]byte
	if b, err := hex.DecodeString(k.KeySHA256); err == nil && len(b) == sha256.Size {
		copy(sum[:], b)
	}
	return sum
}

// keyFields are Key's settings by YAML name.
var keyFields = func() map[string]int {
	m := map[string]int{}
	t := reflect.TypeFor[Key]()
	for i := range t.NumField() {
		m[t.Field(i).Tag.Get("yaml")] = i
	}
	return m
}()

// ParseKeys parses a keys file: a YAML (or JSON) list of keys, or a
// mapping whose one key "keys" holds the list. path names the file in
// errors; a problem is a *SourceError with the line, whose field is
// "keys[INDEX].SETTING" and whose problem names the key. Every entry is
// validated (see Key) and no name or key may be given twice. It does
// not check the file's mode: see ReadKeys.
func ParseKeys(path string, data []byte) ([]Key, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, &SourceError{Source: path, Err: execbox.Invalid("keys", "%s", strings.TrimPrefix(err.Error(), "yaml: "))}
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	d := fileDecoder{path: path}
	n := resolve(doc.Content[0])
	if n.Kind == yaml.MappingNode && len(n.Content) == 2 && n.Content[0].Value == "keys" {
		n = resolve(n.Content[1])
	}
	keys := d.keyList("keys", n)
	return keys, errors.Join(d.errs...)
}

// ReadKeys reads and parses the keys file at path, refusing one that
// holds a key in clear and that group or others may read.
func ReadKeys(path string) ([]Key, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &SourceError{Source: "server.keys_file", Err: execbox.Invalid("server.keys_file", "%s", pathErrText(err))}
	}
	defer f.Close()
	fi, err := f.Stat()
	var data []byte
	if err == nil {
		data, err = io.ReadAll(io.LimitReader(f, 16<<20))
	}
	if err != nil {
		return nil, &SourceError{Source: "server.keys_file", Err: execbox.Invalid("server.keys_file", "%s", pathErrText(err))}
	}
	keys, err := ParseKeys(path, data)
	if err != nil {
		return nil, err
	}
	if err := secretMode(path, fi, "keys", keys); err != nil {
		return nil, err
	}
	return keys, nil
}

// secretMode refuses keys in clear in a file group or others may read.
func secretMode(path string, fi os.FileInfo, prefix string, keys []Key) error {
	if fi.Mode().Perm()&0o077 == 0 {
		return nil
	}
	for i, k := range keys {
		if k.Key != "" {
			return &SourceError{Source: path, Err: execbox.Invalid(fmt.Sprintf("%s[%d].key", prefix, i),
				"key %q: the key is in clear in a file group or others may read (mode %#o): give key_sha256 instead, or chmod go-rwx %s", k.Name, fi.Mode().Perm(), path)}
		}
	}
	return nil
}

// keys decodes server.keys in the config file, which, when it holds a
// key in clear, must be readable by its owner alone.
func (d *fileDecoder) keys(n *yaml.Node) {
	if isNull(n) {
		return
	}
	before := len(d.errs)
	keys := d.keyList("server.keys", n)
	if len(d.errs) == before && d.path != "" {
		if fi, err := os.Stat(d.path); err == nil {
			if err := secretMode(d.path, fi, "server.keys", keys); err != nil {
				d.errs = append(d.errs, err)
			}
		}
	}
	d.c.Server.Keys = keys
	d.c.sources["server.keys"] = source{name: d.path, line: n.Line}
}

// keyList decodes and validates a list of keys named prefix.
func (d *fileDecoder) keyList(prefix string, n *yaml.Node) []Key {
	if n.Kind != yaml.SequenceNode {
		d.fail(n, prefix, "must be a list of keys ({name, key or key_sha256, admin, max_*})")
		return nil
	}
	keys := make([]Key, len(n.Content))
	for i, e := range n.Content {
		d.key(fmt.Sprintf("%s[%d]", prefix, i), resolve(e), &keys[i])
	}
	names := map[string]int{}
	sums := map[[sha256.Size]byte]int{}
	for i, k := range keys {
		e := n.Content[i]
		name := fmt.Sprintf("%s[%d]", prefix, i)
		for _, p := range k.validate() {
			d.fail(e, name+"."+p.Field, "key %q: %s", k.Name, p.Problem)
		}
		if j, dup := names[k.Name]; dup && k.Name != "" {
			d.fail(e, name+".name", "key %q: the name of %s[%d] too", k.Name, prefix, j)
		}
		if sum := k.SHA256(); sum != ([sha256.Size]byte{}) {
			if j, dup := sums[sum]; dup {
				d.fail(e, name+".key", "key %q: the same key as %s[%d]", k.Name, prefix, j)
			}
			sums[sum] = i
		}
		names[k.Name] = i
	}
	return keys
}

// key decodes one entry, refusing unknown and repeated settings.
func (d *fileDecoder) key(name string, n *yaml.Node, k *Key) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, name, "must be a mapping: {name, key or key_sha256, admin, max_*}")
		return
	}
	seen := map[string]bool{}
	v := reflect.ValueOf(k).Elem()
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], resolve(n.Content[i+1])
		field := name + "." + kn.Value
		idx, ok := keyFields[kn.Value]
		switch {
		case seen[kn.Value]:
			d.fail(kn, field, "set twice")
			continue
		case !ok:
			d.fail(kn, field, "unknown setting (known: name, key, key_sha256, admin, max_sandboxes, max_memory, max_pids, max_cpus, max_cpu_time, max_result_memory)")
			continue
		case vn.Kind != yaml.ScalarNode:
			d.fail(vn, field, "must be a single value")
			continue
		}
		seen[kn.Value] = true
		var err error
		if f := v.Field(idx); f.Kind() == reflect.Bool {
			var b bool
			if err = vn.Decode(&b); err != nil {
				err = fmt.Errorf("must be true or false")
			}
			f.SetBool(b)
		} else {
			err = setScalar(f, vn.Value)
		}
		if err != nil {
			d.fail(vn, field, "%v", err)
		}
	}
}

// validate lists the problems of k, each a FieldError naming the
// setting.
func (k *Key) validate() []*execbox.FieldError {
	var errs []*execbox.FieldError
	add := func(field, format string, args ...any) {
		errs = append(errs, execbox.Invalid(field, format, args...))
	}
	if !validName(k.Name) {
		add("name", "must be 1 to 64 of A-Z a-z 0-9 . _ -")
	}
	switch {
	case k.Key == "" && k.KeySHA256 == "":
		add("key", "is required (or key_sha256)")
	case k.Key != "" && k.KeySHA256 != "":
		add("key", "give key or key_sha256, not both")
	case k.Key != "" && len(k.Key) < MinKeyLength:
		add("key", "must be at least %d bytes", MinKeyLength)
	case k.Key != "" && strings.TrimSpace(k.Key) != k.Key:
		add("key", "must not start or end with white space")
	case k.KeySHA256 != "" && k.SHA256() == [sha256.Size]byte{}:
		add("key_sha256", "must be 64 hexadecimal digits (sha256sum of the key)")
	}
	for _, m := range []struct {
		field string
		v     float64
	}{
		{"max_sandboxes", float64(k.MaxSandboxes)}, {"max_memory", float64(k.MaxMemory)},
		{"max_pids", float64(k.MaxPIDs)}, {"max_cpus", k.MaxCPUs}, {"max_cpu_time", float64(k.MaxCPUTime)},
		{"max_result_memory", float64(k.MaxResultMemory)},
	} {
		if m.v < 0 {
			add(m.field, "must not be negative (0: the server's maximum)")
		}
	}
	if k.MaxCPUTime > 0 && k.MaxCPUTime < time.Second {
		add("max_cpu_time", "must be at least 1s (the kernel counts whole seconds)")
	}
	return errs
}

// validName reports whether s is 1 to 64 of A-Z a-z 0-9 . _ -.
func validName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// Keys returns every key of execbox serve: server.keys, then those of
// the file server.keys_file names. No name or key may be in both.
func (c *Config) Keys() ([]Key, error) {
	keys := append([]Key(nil), c.Server.Keys...)
	if c.Server.KeysFile == "" {
		return keys, nil
	}
	more, err := ReadKeys(c.Server.KeysFile)
	if err != nil {
		return nil, err
	}
	var errs []error
	for i, k := range more {
		for j, o := range keys {
			switch {
			case k.Name == o.Name:
				errs = append(errs, &SourceError{Source: c.Server.KeysFile, Err: execbox.Invalid(fmt.Sprintf("keys[%d].name", i), "key %q: the name of server.keys[%d] too", k.Name, j)})
			case k.SHA256() == o.SHA256():
				errs = append(errs, &SourceError{Source: c.Server.KeysFile, Err: execbox.Invalid(fmt.Sprintf("keys[%d].key", i), "key %q: the same key as server.keys[%d]", k.Name, j)})
			}
		}
	}
	return append(keys, more...), errors.Join(errs...)
}
