package execbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
)

// DecodeSettings decodes a runtime's settings into v (a pointer to a struct
// with json tags), strictly and key by key, so that every problem is
// reported at once: each unknown key, and each value of the wrong type, is
// an ErrInvalidArgument *FieldError naming it (runtimes.NAME.KEY), whose
// problem says what the key takes.
func DecodeSettings(runtime string, settings map[string]any, v any) error {
	if len(settings) == 0 {
		return nil
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("execbox: DecodeSettings into %T, not a pointer to a struct", v))
	}
	st := rv.Elem()
	known := settingFields(st.Type())
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var errs []error
	for _, k := range keys {
		key := "runtimes." + runtime + "." + k
		index, ok := known[k]
		if !ok {
			errs = append(errs, &settingsError{Invalid(key, "unknown key (known: %s)", strings.Join(sortedKeys(known), ", "))})
			continue
		}
		if err := decodeSetting(settings[k], st.FieldByIndex(index)); err != nil {
			errs = append(errs, &settingsError{Invalid(key, "%s", err)})
		}
	}
	return errors.Join(errs...)
}

// settingsError is a problem DecodeSettings found: a key or a value that
// does not fit the runtime's settings at all, whatever the machine.
type settingsError struct{ *FieldError }

func (e *settingsError) Unwrap() error { return e.FieldError }

// settingFields maps the json names of t's fields (those of embedded
// structs included) to their indexes.
func settingFields(t reflect.Type) map[string][]int {
	out := map[string][]int{}
	for _, f := range reflect.VisibleFields(t) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" || f.Anonymous && name == "" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Index
	}
	return out
}

func sortedKeys(m map[string][]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// decodeSetting decodes one value into dst, strictly. The error says
// what was wanted and what was given.
func decodeSetting(value any, dst reflect.Value) error {
	b, err := json.Marshal(value)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err = dec.Decode(dst.Addr().Interface())
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		where := ""
		if te.Field != "" {
			where = " at " + te.Field
		}
		return fmt.Errorf("want %s%s, got %s", typeWord(te.Type), where, shortJSON(b))
	}
	return errors.New(strings.TrimPrefix(err.Error(), "json: "))
}

// typeWord names what a Go type takes in a settings file.
func typeWord(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	}
	return t.String()
}

// shortJSON is b, cut to a readable length.
func shortJSON(b []byte) string {
	const max = 60
	if len(b) > max {
		return string(b[:max]) + "..."
	}
	return string(b)
}

// SettingsProblems keeps, of the errors joined in err (as a factory
// returns them), those DecodeSettings made: unknown keys and values of
// the wrong type, problems of the configuration whatever the machine or
// the environment. It returns nil if there are none.
func SettingsProblems(err error) error {
	var out []error
	for _, e := range leafErrors(err) {
		var se *settingsError
		if errors.As(e, &se) {
			out = append(out, se)
		}
	}
	return errors.Join(out...)
}

// leafErrors lists the leaves of a tree of joined errors.
func leafErrors(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, leafErrors(e)...)
		}
		return out
	}
	if u := errors.Unwrap(err); u != nil {
		if _, ok := u.(interface{ Unwrap() []error }); ok {
			return leafErrors(u)
		}
	}
	return []error{err}
}

// Check reports what is wrong with opts for the runtime called name,
// without keeping a runtime: it runs the factory, which checks its
// settings but touches nothing (see Factory). An unknown name is
// ErrNotFound. Callers check the configuration of a runtime this way
// before anything runs.
func (r *Registry) Check(name string, opts Options) error {
	r.mu.RLock()
	f := r.factories[name]
	r.mu.RUnlock()
	if f == nil {
		_, err := r.Open(name, opts) // the ErrNotFound listing the names
		return err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	_, err := f(opts)
	return err
}
