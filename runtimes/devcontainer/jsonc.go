package devcontainer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// standardize returns the JSON of a JSONC document (devcontainer.json's
// syntax: JSON with // and /* */ comments and trailing commas in arrays
// and objects). Comments, trailing commas and a leading byte order mark
// become spaces, newlines stay: every byte keeps its offset, so the
// positions a decoder reports are the file's. Anything else is left for
// the decoder to judge.
func standardize(src []byte) ([]byte, error) {
	b := bytes.Clone(src)
	if bytes.HasPrefix(b, []byte("\xef\xbb\xbf")) {
		copy(b, "   ")
	}
	blank := func(i, j int) { // [i, j) to spaces, newlines kept
		for ; i < j; i++ {
			if b[i] != '\n' && b[i] != '\r' {
				b[i] = ' '
			}
		}
	}
	comma := -1 // a comma not yet followed by anything but space and comments
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			comma = -1
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case '/':
			switch {
			case i+1 < len(b) && b[i+1] == '/':
				j := bytes.IndexByte(b[i:], '\n')
				if j < 0 {
					j = len(b) - i
				}
				blank(i, i+j)
				i += j - 1
			case i+1 < len(b) && b[i+1] == '*':
				j := bytes.Index(b[i+2:], []byte("*/"))
				if j < 0 {
					return nil, &syntaxError{off: int64(i), msg: "unterminated /* comment"}
				}
				blank(i, i+2+j+2)
				i += 2 + j + 1
			default:
				comma = -1
			}
		case ',':
			comma = i
		case '}', ']':
			if comma >= 0 {
				b[comma] = ' '
			}
			comma = -1
		case ' ', '\t', '\n', '\r':
		default:
			comma = -1
		}
	}
	return b, nil
}

// syntaxError is a JSONC syntax error at a byte offset.
type syntaxError struct {
	off int64
	msg string
}

func (e *syntaxError) Error() string { return e.msg }

// decodeJSONC decodes a JSONC document into v; a syntax error says where
// (line:column).
func decodeJSONC(src []byte, v any) error {
	b, err := standardize(src)
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	var se *syntaxError
	var je *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		return fmt.Errorf("%s: %s", position(src, se.off), se.msg)
	case errors.As(err, &je):
		return fmt.Errorf("%s: %s", position(src, je.Offset), je.Error())
	case errors.As(err, &te):
		return fmt.Errorf("%s: %v", position(src, te.Offset), err)
	}
	return err
}

// position is the line:column (from 1, in bytes) of offset off of src.
func position(src []byte, off int64) string {
	off = max(0, min(off, int64(len(src))))
	line := 1 + bytes.Count(src[:off], []byte("\n"))
	col := off - int64(bytes.LastIndexByte(src[:off], '\n'))
	return fmt.Sprintf("line %d, column %d", line, col)
}
