package config

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// field is one settable leaf of Config, derived from the struct tags.
type field struct {
	key   string // YAML key path, e.g. "exec.timeout"
	env   string // environment variable, e.g. "EXECBOX_EXEC_TIMEOUT"
	flag  string // flag name without dashes, e.g. "timeout"; "" for none
	usage string // one-line flag help
	path  bool   // a file path, relative to the config file when set there
	index []int  // reflect index from Config
}

// fields lists Config's leaves in declaration order. Runtimes is not a leaf:
// it is decoded as a free map.
var fields = collectFields(reflect.TypeFor[Config](), "", nil)

// sections are the keys that hold mappings: "", "exec", "limits", "log".
var sections = map[string]bool{}

// customKeys are the keys with their own decoder (fields tagged
// config:"custom"): "server.pools".
var customKeys = map[string]bool{}

var (
	durationType = reflect.TypeFor[time.Duration]()
	sizeType     = reflect.TypeFor[Size]()
)

func collectFields(t reflect.Type, prefix string, index []int) []*field {
	sections[strings.TrimSuffix(prefix, ".")] = true
	var out []*field
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if name == "" || name == "-" || name == "runtimes" || sf.Tag.Get("config") == "own" {
			continue
		}
		idx := append(append([]int(nil), index...), i)
		key := prefix + name
		if sf.Tag.Get("config") == "custom" {
			customKeys[key] = true
			continue
		}
		if sf.Type.Kind() == reflect.Struct && sf.Type != durationType {
			out = append(out, collectFields(sf.Type, key+".", idx)...)
			continue
		}
		if !settable(sf.Type) {
			panic(fmt.Sprintf("config: field %s has unsupported type %s", key, sf.Type))
		}
		f := &field{
			key:   key,
			env:   "EXECBOX_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_")),
			flag:  sf.Tag.Get("flag"),
			usage: sf.Tag.Get("usage"),
			path:  sf.Tag.Get("config") == "path",
			index: idx,
		}
		if f.flag == "-" {
			f.flag = ""
		}
		out = append(out, f)
	}
	return out
}

func settable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.String, reflect.Int64, reflect.Float64:
		return true
	case reflect.Slice:
		return t.Elem().Kind() == reflect.String
	}
	return false
}

func fieldByKey(key string) *field {
	for _, f := range fields {
		if f.key == key {
			return f
		}
	}
	return nil
}

// value returns the field's value in c (addressable).
func (f *field) value(c *Config) reflect.Value {
	return reflect.ValueOf(c).Elem().FieldByIndex(f.index)
}

func (f *field) isList() bool { return f.value(&Config{}).Kind() == reflect.Slice }

// set parses s into the field of c. A list takes comma-separated items.
// The error is the problem only, without the key.
func (f *field) set(c *Config, s string) error {
	v := f.value(c)
	if v.Kind() == reflect.Slice {
		return f.setList(c, splitList(s))
	}
	return setScalar(v, s)
}

// setList sets a list field to items.
func (f *field) setList(c *Config, items []string) error {
	v := f.value(c)
	out := reflect.MakeSlice(v.Type(), 0, len(items))
	for _, it := range items {
		e := reflect.New(v.Type().Elem()).Elem()
		if err := setScalar(e, it); err != nil {
			return err
		}
		out = reflect.Append(out, e)
	}
	v.Set(out)
	return nil
}

func setScalar(v reflect.Value, s string) error {
	switch v.Type() {
	case durationType:
		d, err := parseDuration(s)
		if err != nil {
			return err
		}
		v.SetInt(int64(d))
		return nil
	case sizeType:
		n, err := ParseSize(s)
		if err != nil {
			return err
		}
		v.SetInt(n)
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Int64:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return fmt.Errorf("invalid integer %q", s)
		}
		v.SetInt(n)
	case reflect.Float64:
		n, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || math.IsNaN(n) || math.IsInf(n, 0) {
			return fmt.Errorf("invalid number %q", s)
		}
		v.SetFloat(n)
	default:
		panic("config: unsupported kind " + v.Kind().String())
	}
	return nil
}

// format renders the field's value in c as it would be written.
func (f *field) format(c *Config) string {
	v := f.value(c)
	switch {
	case v.Type() == durationType:
		return time.Duration(v.Int()).String()
	case v.Type() == sizeType:
		return Size(v.Int()).String()
	case v.Kind() == reflect.Slice:
		return strings.Join(v.Interface().([]string), ",")
	}
	return fmt.Sprint(v.Interface())
}

// typeName names the kind of value the field takes, for usage text.
func (f *field) typeName() string {
	v := f.value(&Config{})
	switch {
	case v.Type() == durationType:
		return "DURATION"
	case v.Type() == sizeType:
		return "SIZE"
	case v.Kind() == reflect.Slice:
		return "NAME"
	case v.Kind() == reflect.Int64:
		return "N"
	case v.Kind() == reflect.Float64:
		return "NUM"
	case f.path:
		return "DIR"
	}
	return strings.ToUpper(f.flag[strings.LastIndex(f.flag, "-")+1:])
}

func splitList(s string) []string {
	var out []string
	for it := range strings.SplitSeq(s, ",") {
		if it = strings.TrimSpace(it); it != "" {
			out = append(out, it)
		}
	}
	return out
}
