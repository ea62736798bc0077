package server

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
)

// inlineMax is the most output bytes a result carries inside its JSON
// when the client accepts multipart: more go as raw parts, which neither
// side has to escape, encode or hold twice.
const inlineMax = 64 << 10

// streamed is a command's output to write into a response: wire is its
// place in the response value, data the kept bytes, name its part.
type streamed struct {
	wire *api.Output
	data []byte
	name string // "stdout" or "stderr"
}

// The responses that carry a command's result. Each is built without
// the outputs' bytes, which writeResult then streams into it.

func writeExecResponse(w http.ResponseWriter, r *http.Request, res execbox.Result, e *api.Error) {
	resp := api.ExecResponse{Result: api.NewResult(stripped(res)), Error: e}
	writeResult(w, r, http.StatusOK, &resp, outputs(&resp.Result.Stdout, &resp.Result.Stderr, res.Stdout, res.Stderr))
}

func writeResultResponse(w http.ResponseWriter, r *http.Request, res execbox.Result) {
	resp := api.NewResult(stripped(res))
	writeResult(w, r, http.StatusOK, &resp, outputs(&resp.Stdout, &resp.Stderr, res.Stdout, res.Stderr))
}

func writeStatusResponse(w http.ResponseWriter, r *http.Request, id string, res *execbox.Result) {
	resp := api.ProcessStatus{ID: id, Running: res == nil}
	if res == nil {
		writeJSON(w, http.StatusOK, resp)
		return
	}
	wr := api.NewResult(stripped(*res))
	resp.Result = &wr
	writeResult(w, r, http.StatusOK, &resp, outputs(&wr.Stdout, &wr.Stderr, res.Stdout, res.Stderr))
}

func writeRunResponse(w http.ResponseWriter, r *http.Request, res execbox.SessionResult, e *api.Error) {
	data := res
	data.Stdout.Data, data.Stderr.Data = nil, nil
	resp := api.RunResponse{Result: api.NewSessionResult(data), Error: e}
	writeResult(w, r, http.StatusOK, &resp, outputs(&resp.Result.Stdout, &resp.Result.Stderr, res.Stdout, res.Stderr))
}

func stripped(res execbox.Result) execbox.Result {
	res.Stdout.Data, res.Stderr.Data = nil, nil
	return res
}

func outputs(stdout, stderr *api.Output, o, e execbox.Output) []streamed {
	return []streamed{{stdout, o.Data, "stdout"}, {stderr, e.Data, "stderr"}}
}

// writeResult answers with v, a response holding a command's result
// whose outputs are outs, without copying the outputs' bytes. A client
// that accepts multipart/mixed gets, when the outputs are large, the JSON
// of v in a part named "response" followed by each output's bytes, raw,
// in a part of its name (api.ContentMultipart); else one JSON body, the
// outputs escaped or base64-encoded as they are written. Either way the
// length is known first and sent as Content-Length.
func writeResult(w http.ResponseWriter, r *http.Request, status int, v any, outs []streamed) {
	var size int
	for _, o := range outs {
		size += len(o.data)
	}
	var b *body
	var err error
	if size > inlineMax && acceptsMultipart(r) {
		b, err = multipartBody(v, outs)
	} else {
		b, err = jsonBody(v, outs)
	}
	if err != nil {
		// The wire types always encode: a bug.
		http.Error(w, "execbox: encoding the response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", b.ctype)
	w.Header().Set("Content-Length", strconv.FormatInt(b.size, 10))
	defer writeDeadline(w, r, b.size)()
	w.WriteHeader(status)
	_ = b.writeTo(w) // the client went away, or read too slowly; nothing to do
}

func acceptsMultipart(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), api.ContentMultipart)
}

// body is a response held as pieces: small ones in memory, and outputs
// written from where they are, encoded on the way.
type body struct {
	ctype  string
	pieces []piece
	size   int64
}

type piece struct {
	raw  []byte // written as is
	text bool   // raw is an output written as a JSON string
	b64  bool   // raw is an output written as a base64 JSON string
	size int    // the length written (text and b64 pieces)
}

func (b *body) add(p piece) {
	b.pieces = append(b.pieces, p)
	if !p.text && !p.b64 {
		p.size = len(p.raw)
	}
	b.size += int64(p.size)
}

// Write makes a body an io.Writer of raw pieces (for multipart.Writer).
func (b *body) Write(p []byte) (int, error) {
	b.add(piece{raw: bytes.Clone(p)})
	return len(p), nil
}

func (b *body) writeTo(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 32<<10)
	for _, p := range b.pieces {
		var err error
		switch {
		case p.text:
			err = writeJSONString(bw, p.raw)
		case p.b64:
			bw.WriteByte('"')
			enc := base64.NewEncoder(base64.StdEncoding, bw)
			if _, err = enc.Write(p.raw); err == nil {
				err = enc.Close()
			}
			bw.WriteByte('"')
		default:
			_, err = bw.Write(p.raw)
		}
		if err != nil {
			return err
		}
	}
	return bw.Flush()
}

// jsonBody is v as JSON with each output's bytes in its Payload. The
// bytes are left out while v is encoded, marked by a string no command
// can print (it holds a random nonce), then written in the marker's place.
func jsonBody(v any, outs []streamed) (*body, error) {
	var marker string // made for the first output with bytes, if any
	for i, o := range outs {
		o.wire.Payload = api.Payload{}
		if len(o.data) == 0 {
			continue
		}
		if marker == "" {
			var nonce [16]byte
			rand.Read(nonce[:])
			marker = "\x00execbox:" + hex.EncodeToString(nonce[:]) + ":"
		}
		o.wire.Text = marker + strconv.Itoa(i)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	rest := buf.Bytes()
	b := &body{ctype: api.ContentJSON}
	for i, o := range outs {
		if len(o.data) == 0 {
			continue
		}
		// The marker as encoding/json wrote it: its NUL as \u0000.
		key := []byte(`"text":"\u0000` + marker[1:] + strconv.Itoa(i) + `"`)
		j := bytes.Index(rest, key)
		if j < 0 {
			return nil, errMarker
		}
		b.add(piece{raw: rest[:j]})
		if n, ok := api.TextLen(o.data); ok {
			b.add(piece{raw: []byte(`"text":`)})
			b.add(piece{raw: o.data, text: true, size: n + 2})
		} else {
			b.add(piece{raw: []byte(`"data":`)})
			b.add(piece{raw: o.data, b64: true, size: base64.StdEncoding.EncodedLen(len(o.data)) + 2})
		}
		rest = rest[j+len(key):]
	}
	b.add(piece{raw: rest})
	return b, nil
}

var errMarker = errors.New("an output's place was lost while encoding")

// multipartBody is v as JSON, its outputs without their bytes, in a part
// named "response", then each non-empty output's bytes in a part of its
// name with their Content-Length.
func multipartBody(v any, outs []streamed) (*body, error) {
	for _, o := range outs {
		o.wire.Payload = api.Payload{}
	}
	js, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	b := &body{}
	mw := multipart.NewWriter(b)
	b.ctype = api.ContentMultipart + "; boundary=" + mw.Boundary()
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="response"`)
	h.Set("Content-Type", api.ContentJSON)
	if _, err := mw.CreatePart(h); err != nil {
		return nil, err
	}
	b.add(piece{raw: js})
	for _, o := range outs {
		if len(o.data) == 0 {
			continue
		}
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="`+o.name+`"`)
		h.Set("Content-Type", api.ContentBytes)
		h.Set("Content-Length", strconv.Itoa(len(o.data)))
		if _, err := mw.CreatePart(h); err != nil {
			return nil, err
		}
		b.add(piece{raw: o.data})
	}
	return b, mw.Close()
}

// writeJSONString writes s, valid UTF-8, as a JSON string: exactly
// api.JSONStringLen(s)+2 bytes.
func writeJSONString(w *bufio.Writer, s []byte) error {
	w.WriteByte('"')
	start := 0
	for i, c := range s {
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		w.Write(s[start:i])
		switch c {
		case '"', '\\':
			w.Write([]byte{'\\', c})
		case '\n':
			w.WriteString(`\n`)
		case '\r':
			w.WriteString(`\r`)
		case '\t':
			w.WriteString(`\t`)
		default:
			w.WriteString(`\u00`)
			w.WriteByte(hexDigits[c>>4])
			w.WriteByte(hexDigits[c&0xf])
		}
		start = i + 1
	}
	w.Write(s[start:])
	return w.WriteByte('"')
}

const hexDigits = "0123456789abcdef"
