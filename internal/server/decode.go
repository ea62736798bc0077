package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
)

// errBodyTooLarge is a request body over the server's limit: code
// resource_exhausted naming the field "body", status 413.
type errBodyTooLarge struct{ fe *execbox.FieldError }

func tooLarge(limit int64) error {
	return &errBodyTooLarge{&execbox.FieldError{
		Field: "body", Kind: execbox.ErrResourceExhausted,
		Problem: fmt.Sprintf("larger than the server's limit of %d bytes", limit),
	}}
}

func (e *errBodyTooLarge) Error() string { return e.fe.Error() }
func (e *errBodyTooLarge) Unwrap() error { return e.fe }

// wireInvalid is an invalid_argument naming a wire field.
func wireInvalid(field, format string, args ...any) error {
	return api.WireFieldError{FieldError: execbox.Invalid(field, format, args...)}
}

// readBody reads all of r, failing with errBodyTooLarge past limit bytes.
func readBody(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		// A body cut short or a broken multipart part: the request's
		// fault, not the server's.
		return nil, wireInvalid("body", "reading it: %v", err)
	}
	if int64(len(b)) > limit {
		return nil, tooLarge(limit)
	}
	return b, nil
}

// decodeJSON decodes the JSON object in body into v strictly: a syntax
// error, a value of the wrong type, trailing data and every unknown field
// (named by its path, "limits.bogus") are *execbox.FieldErrors. An empty
// body is an error when required, else leaves v alone.
func decodeJSON(body []byte, v any, required bool) error {
	if len(bytes.TrimSpace(body)) == 0 {
		if required {
			return wireInvalid("body", "is required (a JSON object)")
		}
		return nil
	}
	// encoding/json would turn bytes that are not UTF-8 into U+FFFD.
	if err := api.CheckJSONUTF8(body); err != nil {
		return err
	}
	if decodeFast(body, v) {
		return nil
	}
	// A bad request (or one the fast path cannot vouch for): decode it
	// again from scratch, to name every problem at once.
	reflect.ValueOf(v).Elem().SetZero()
	return decodeFull(body, v)
}

// decodeFull is decodeJSON's path for requests decodeFast does not take:
// first as generic values (syntax, then every unknown field by its exact
// name), then into v.
func decodeFull(body []byte, v any) error {
	var generic any
	if err := json.Unmarshal(body, &generic); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return wireInvalid("body", "invalid JSON at offset %d: %v", se.Offset, err)
		}
		return wireInvalid("body", "invalid JSON: %v", err)
	}
	if _, ok := generic.(map[string]any); !ok {
		return wireInvalid("body", "must be a JSON object")
	}
	var unknown []error
	unknownFields(reflect.TypeOf(v), generic, "", &unknown)
	if len(unknown) > 0 {
		return errors.Join(unknown...)
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		var fe *execbox.FieldError
		switch {
		case errors.As(err, &fe):
			return api.WireFieldError{FieldError: fe}
		case errors.As(err, &te):
			field := te.Field
			if field == "" {
				field = "body"
			}
			return wireInvalid(field, "must be %s, not a JSON %s", typeName(te.Type), te.Value)
		}
		return wireInvalid("body", "%v", err)
	}
	return nil
}

var (
	timeType      = reflect.TypeFor[time.Time]()
	unmarshalType = reflect.TypeFor[json.Unmarshaler]()
)

// unknownFields appends an error for every key of v that t has no field
// for, recursively, naming it by its path.
// maxArrayLen bounds the elements of any array in a request body (argv,
// setup commands, assets...): decoding and validating each costs memory,
// and a body within its byte limit may hold millions of them.
const maxArrayLen = 1 << 16

func unknownFields(t reflect.Type, v any, path string, out *[]error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == timeType || reflect.PointerTo(t).Implements(unmarshalType) {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return // a type error, reported by the second decode
		}
		fields := jsonFields(t)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			ft, ok := fields[k]
			if !ok {
				name := k
				if name == "" {
					name = `""` // a field named "" would name nothing
				}
				*out = append(*out, wireInvalid(path+name, "unknown field"))
				continue
			}
			unknownFields(ft, m[k], path+k+".", out)
		}
	case reflect.Slice, reflect.Array:
		items, ok := v.([]any)
		if !ok {
			return
		}
		base := strings.TrimSuffix(path, ".")
		if len(items) > maxArrayLen {
			*out = append(*out, wireInvalid(base, "has %d elements, more than the %d allowed", len(items), maxArrayLen))
			return
		}
		for i, item := range items {
			if len(*out) >= execbox.MaxProblems {
				return
			}
			unknownFields(t.Elem(), item, base+"["+strconv.Itoa(i)+"].", out)
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		for k, item := range m {
			unknownFields(t.Elem(), item, path+k+".", out)
		}
	}
}

// jsonFields maps the JSON names of t's fields (embedded structs
// flattened) to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := make(map[string]reflect.Type)
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "an array"
	case reflect.Map, reflect.Struct, reflect.Pointer:
		return "an object"
	}
	return t.String()
}

// readJSON reads and decodes a request body of at most limit bytes.
func readJSON(r *http.Request, limit int64, v any, required bool) error {
	if ct := mediaType(r.Header.Get("Content-Type")); ct != "" && ct != api.ContentJSON {
		return execbox.Invalid("Content-Type", "%q is not supported here (want %s)", ct, api.ContentJSON)
	}
	h, err := reserve(r, "a JSON body", "body", bodySize(r, limit))
	defer h.release()
	if err != nil {
		return err
	}
	b, err := readBody(r.Body, limit)
	if err != nil {
		return err
	}
	return decodeJSON(b, v, required)
}

// bodySize is the most reading r's body, bounded by limit, holds: its
// declared length, or limit.
func bodySize(r *http.Request, limit int64) int64 {
	if r.ContentLength >= 0 && r.ContentLength <= limit {
		return r.ContentLength
	}
	return limit
}

func mediaType(ct string) string {
	t, _, _ := strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(t))
}

// Query helpers: each names the parameter in its error.

func queryBool(r *http.Request, name string) (bool, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, execbox.Invalid(name, "%q is not a boolean (true or false)", s)
	}
	return b, nil
}

func queryInt(r *http.Request, name string) (int64, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, execbox.Invalid(name, "%q is not a non-negative integer", s)
	}
	return n, nil
}

// decodeFast decodes body into v in one pass, strictly, and reports
// whether that is the answer: true for a valid request. A request it
// cannot vouch for goes to decodeJSON's full path, which names every
// problem: one with an unknown field, a wrong type or trailing data; one
// long enough to hold more than maxArrayLen elements in an array; and one
// whose keys encoding/json may have matched to a field without regard to
// case ("Command"), which the protocol refuses.
func decodeFast(body []byte, v any) bool {
	if len(body) > 2*maxArrayLen { // each element takes 2 bytes or more
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return false
	}
	if len(bytes.TrimSpace(body[dec.InputOffset():])) > 0 {
		return false
	}
	return exactKeys(body, namesOf(reflect.TypeOf(v)))
}

// fieldNames are the JSON names of a type's fields, at any depth, exactly
// and folded to lower case.
type fieldNames struct{ exact, folded map[string]bool }

var namesCache sync.Map // reflect.Type -> *fieldNames

func namesOf(t reflect.Type) *fieldNames {
	if n, ok := namesCache.Load(t); ok {
		return n.(*fieldNames)
	}
	n := &fieldNames{exact: map[string]bool{}, folded: map[string]bool{}}
	collectNames(t, n, map[reflect.Type]bool{})
	namesCache.Store(t, n)
	return n
}

func collectNames(t reflect.Type, n *fieldNames, seen map[reflect.Type]bool) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return
	}
	seen[t] = true
	for name, ft := range jsonFields(t) {
		n.exact[name] = true
		n.folded[strings.ToLower(name)] = true
		collectNames(ft, n, seen)
	}
}

// exactKeys reports whether every object key in body (valid JSON) either
// is one of names exactly or matches none of them even without regard to
// case (a map's key, such as a variable's name). A key with an escape is
// not vouched for.
func exactKeys(body []byte, names *fieldNames) bool {
	for i := 0; i < len(body); i++ {
		if body[i] != '"' {
			continue
		}
		start := i + 1
		escaped := false
		for i = start; i < len(body) && body[i] != '"'; i++ {
			if body[i] == '\\' {
				escaped = true
				i++
			}
		}
		end := i
		j := end + 1
		for j < len(body) && (body[j] == ' ' || body[j] == '\t' || body[j] == '\n' || body[j] == '\r') {
			j++
		}
		if j >= len(body) || body[j] != ':' {
			continue // a string value
		}
		key := body[start:end]
		if escaped {
			return false
		}
		if !names.exact[string(key)] && names.folded[strings.ToLower(string(key))] {
			return false
		}
	}
	return true
}
