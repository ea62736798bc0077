package server

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
)

// TestWriteResult: a result written as streamed JSON decodes to what
// encoding/json makes of it, and as multipart to the same bytes; either
// way its Content-Length is exact. The outputs hold text with every
// character JSON escapes, binary bytes, a marker-like string and nothing.
func TestWriteResult(t *testing.T) {
	text := []byte("a\"b\\c\n\r\t\x01\x1f\u2028é" + strings.Repeat("x", 70<<10))
	binary := append([]byte{0, 0xff, 0xfe}, bytes.Repeat([]byte{0}, 70<<10)...)
	for _, tc := range []struct {
		name           string
		stdout, stderr []byte
	}{
		{"text and binary", text, binary},
		{"marker-like", []byte("\x00execbox:00000000000000000000000000000000:0"), nil},
		{"empty", nil, nil},
		{"small", []byte("hi\n"), []byte("oops\n")},
	} {
		res := execbox.Result{Reason: execbox.ReasonExited, Detail: `"text":"\u0000execbox:`,
			Stdout: execbox.Output{Data: tc.stdout, Total: int64(len(tc.stdout))},
			Stderr: execbox.Output{Data: tc.stderr, Total: int64(len(tc.stderr))}}
		for _, accept := range []string{api.ContentJSON, api.ContentMultipart + ", " + api.ContentJSON} {
			r := httptest.NewRequest("POST", "/v1/exec", nil)
			r.Header.Set("Accept", accept)
			w := httptest.NewRecorder()
			writeExecResponse(w, r, res, nil)
			body := w.Body.Bytes()
			if cl := w.Header().Get("Content-Length"); cl != strconv.Itoa(len(body)) {
				t.Errorf("%s, Accept %s: Content-Length %s for %d bytes", tc.name, accept, cl, len(body))
			}
			got := decode(t, w.Header().Get("Content-Type"), body)
			if !reflect.DeepEqual(got.Stdout.Data, res.Stdout.Data) && len(got.Stdout.Data)+len(res.Stdout.Data) > 0 ||
				!reflect.DeepEqual(got.Stderr.Data, res.Stderr.Data) && len(got.Stderr.Data)+len(res.Stderr.Data) > 0 ||
				got.Detail != res.Detail || got.Stdout.Total != res.Stdout.Total {
				t.Errorf("%s, Accept %s: decoded %q/%q, want %q/%q", tc.name, accept, trim(got.Stdout.Data), trim(got.Stderr.Data), trim(res.Stdout.Data), trim(res.Stderr.Data))
			}
			if want := api.ContentJSON; len(tc.stdout)+len(tc.stderr) <= inlineMax && !strings.HasPrefix(w.Header().Get("Content-Type"), want) {
				t.Errorf("%s: small outputs came as %s", tc.name, w.Header().Get("Content-Type"))
			}
		}
	}
}

func trim(b []byte) []byte { return b[:min(len(b), 20)] }

// decode reads a response body the way a client may: JSON with
// encoding/json, or multipart with mime/multipart.
func decode(t *testing.T, ctype string, body []byte) execbox.Result {
	t.Helper()
	mt, params, err := mime.ParseMediaType(ctype)
	if err != nil {
		t.Fatal(err)
	}
	var resp api.ExecResponse
	if mt == api.ContentJSON {
		if err := json.Unmarshal(body, &resp); err != nil {
			t.Fatalf("the JSON body does not decode: %v", err)
		}
		return resp.Result.Result()
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return resp.Result.Result()
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(p)
		switch p.FormName() {
		case "response":
			if err := json.Unmarshal(b, &resp); err != nil {
				t.Fatal(err)
			}
		case "stdout":
			resp.Result.Stdout.Data = b
		case "stderr":
			resp.Result.Stderr.Data = b
		}
	}
}
