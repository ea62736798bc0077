package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/execbox/execbox"
)

// JSON strings are UTF-8: encoding/json replaces every invalid byte with
// U+FFFD on both sides, which would silently run another argv, set
// another env value or name another file. So a string that is not UTF-8
// is refused where it would be altered, naming its field: by the client
// before it sends (CheckUTF8), by the server before it decodes
// (CheckJSONUTF8). Raw bytes travel as a Payload, or as a query parameter
// (file paths), which carries any bytes.

// CheckUTF8 returns an invalid_argument *execbox.FieldError for every
// string in v (a wire type) that is not valid UTF-8, naming it by its
// wire path ("command[1]", "env.NAME", "setup[0].dir"), joined.
func CheckUTF8(v any) error {
	var errs []error
	checkValue(reflect.ValueOf(v), "", &errs)
	return errors.Join(errs...)
}

func checkValue(v reflect.Value, path string, errs *[]error) {
	bad := func(field, what string) {
		*errs = append(*errs, execbox.Invalid(field, "%s not valid UTF-8, which JSON cannot carry unchanged", what))
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			checkValue(v.Elem(), path, errs)
		}
	case reflect.String:
		if !utf8.ValidString(v.String()) {
			bad(path, "is")
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			checkValue(v.Field(i), join(path, name), errs)
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return // base64 on the wire: any bytes
		}
		for i := range v.Len() {
			checkValue(v.Index(i), path+"["+strconv.Itoa(i)+"]", errs)
		}
	case reflect.Map:
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
		for _, k := range keys {
			ks := fmt.Sprint(k)
			if k.Kind() == reflect.String && !utf8.ValidString(ks) {
				bad(path, fmt.Sprintf("has a key %q", ks))
				continue
			}
			checkValue(v.MapIndex(k), join(path, ks), errs)
		}
	}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// CheckJSONUTF8 returns nil if body is valid UTF-8, else an
// invalid_argument WireFieldError naming the JSON field whose string
// holds the first invalid byte ("command[1]", "env.NAME", or "body" when
// it is not inside a string of an object the decoder can follow).
func CheckJSONUTF8(body []byte) error {
	if utf8.Valid(body) {
		return nil
	}
	at := invalidOffset(body)
	field := fieldAt(body, at)
	return WireFieldError{FieldError: execbox.Invalid(field, "is not valid UTF-8 (byte %d of the body), which JSON cannot carry unchanged", at)}
}

func invalidOffset(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// fieldAt follows the tokens of body up to the one containing offset at
// and returns its path; "body" if it cannot tell.
func fieldAt(body []byte, at int) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	var stack []frame
	path := func(frames []frame) string {
		p := ""
		for _, f := range frames {
			if f.obj {
				p = join(p, f.key)
			} else {
				p += "[" + strconv.Itoa(f.index) + "]"
			}
		}
		if p == "" {
			return "body"
		}
		return p
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return "body"
		}
		end := int(dec.InputOffset())
		var top *frame
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			if len(stack) > 0 {
				advance(&stack[len(stack)-1])
			}
			continue
		}
		if top != nil && top.obj && top.atKey {
			if end > at { // the key itself: name its object
				return path(stack[:len(stack)-1])
			}
			top.key, top.atKey = fmt.Sprint(tok), false
			continue
		}
		if end > at {
			return path(stack)
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{obj: true, atKey: true})
		case json.Delim('['):
			stack = append(stack, frame{})
		default:
			if top != nil {
				advance(top)
			}
		}
	}
}

// frame is an object or array fieldAt is inside.
type frame struct {
	obj   bool
	key   string // obj: the current member's key
	index int    // array: the current element's index
	atKey bool   // obj: the next string is a key
}

// advance moves f past one value.
func advance(f *frame) {
	if f.obj {
		f.atKey = true
	} else {
		f.index++
	}
}
