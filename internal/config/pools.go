package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"go.yaml.in/yaml/v3"
)

// poolKeys are the keys of a server.pools entry: api.Pool's wire names.
var poolKeys = func() []string {
	var keys []string
	t := reflect.TypeFor[api.Pool]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		keys = append(keys, name)
	}
	slices.Sort(keys)
	return keys
}()

// pools decodes server.pools: a list of mappings, each an api.Pool. Every
// key's line is recorded (down into spec), so problems found later name
// the line of the value at fault.
func (d *fileDecoder) pools(n *yaml.Node) {
	const key = "server.pools"
	if isNull(n) {
		return
	}
	if n.Kind != yaml.SequenceNode {
		d.fail(n, key, "must be a list of pools, e.g. [{name: py, min_idle: 2, spec: {...}}]")
		return
	}
	d.c.sources[key] = source{name: d.path, line: n.Line}
	var out []api.Pool
	for i, item := range n.Content {
		item = resolve(item)
		prefix := fmt.Sprintf("%s[%d]", key, i)
		d.c.sources[prefix] = source{name: d.path, line: item.Line}
		if item.Kind != yaml.MappingNode {
			d.fail(item, prefix, "must be a mapping (name, runtime, spec, initial, min_idle, max, fallback)")
			continue
		}
		// Kept even if a value did not decode, so validation reports the
		// others' problems too.
		var p api.Pool
		d.pool(prefix, item, &p)
		out = append(out, p)
	}
	d.c.Server.Pools = out
}

// pool decodes one entry into p, reporting what does not fit.
func (d *fileDecoder) pool(prefix string, n *yaml.Node, p *api.Pool) {
	seen := map[string]int{}
	fields := map[string][2]*yaml.Node{} // key, value
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], resolve(n.Content[i+1])
		key := prefix + "." + kn.Value
		switch line, dup := seen[kn.Value]; {
		case dup:
			d.fail(kn, key, "set twice (first at line %d)", line)
			continue
		case !slices.Contains(poolKeys, kn.Value):
			d.fail(kn, key, "unknown key (known: %s)", strings.Join(poolKeys, ", "))
			continue
		}
		seen[kn.Value] = kn.Line
		d.record(key, kn.Line, vn)
		fields[kn.Value] = [2]*yaml.Node{kn, vn}
	}
	// Each value decodes through JSON, as the API's body would.
	for name, kv := range fields {
		kn, vn := kv[0], kv[1]
		m := map[string]any{}
		var v any
		if err := vn.Decode(&v); err != nil {
			d.fail(vn, prefix+"."+name, "%s", strings.TrimPrefix(err.Error(), "yaml: "))
			continue
		}
		m[name] = v
		b, err := json.Marshal(m)
		if err == nil {
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.DisallowUnknownFields()
			err = dec.Decode(p)
		}
		if err != nil {
			field := prefix + "." + name
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) && te.Field != "" {
				field = prefix + "." + te.Field
				err = fmt.Errorf("want %s, not %s", te.Type, te.Value)
			}
			d.fail(kn, field, "%s", strings.TrimPrefix(err.Error(), "json: "))
		}
	}
}

// record notes line for key, and the line of every key and list item
// under it in n.
func (d *fileDecoder) record(key string, line int, n *yaml.Node) {
	n = resolve(n)
	d.c.sources[key] = source{name: d.path, line: line}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			d.record(key+"."+n.Content[i].Value, n.Content[i].Line, n.Content[i+1])
		}
	case yaml.SequenceNode:
		for i, e := range n.Content {
			d.record(fmt.Sprintf("%s[%d]", key, i), e.Line, e)
		}
	}
}

// validatePools checks each pool as POST /v1/pools would, naming
// server.pools[i].FIELD, and that names are unique. A pool's runtime is
// checked by the server, which knows its runtimes.
func (s *Server) validatePools() []error {
	var errs []error
	first := map[string]int{}
	for i, p := range s.Pools {
		prefix := fmt.Sprintf("server.pools[%d].", i)
		if _, err := p.Validate(); err != nil {
			errs = append(errs, execbox.PrefixFields(prefix, err))
		}
		if j, dup := first[p.Name]; dup {
			errs = append(errs, execbox.Invalid(prefix+"name", "pool %q is defined twice (first at server.pools[%d])", p.Name, j))
		} else {
			first[p.Name] = i
		}
	}
	return errs
}
