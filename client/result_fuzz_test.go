package client

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/execbox/execbox/api"
)

// FuzzDecodeResult: whatever a server sends as a result, JSON or
// multipart, decodeResult returns an error or a result whose outputs hold
// at most the limit each; it never panics nor allocates past the limit
// because a part claimed more.
func FuzzDecodeResult(f *testing.F) {
	const limit = 1 << 16
	mp := "multipart/mixed; boundary=b"
	f.Add(mp, []byte("--b\r\nContent-Disposition: form-data; name=\"response\"\r\n\r\n{\"result\":{\"reason\":\"exited\",\"stdout\":{\"total\":3}}}\r\n--b\r\nContent-Disposition: form-data; name=\"stdout\"\r\nContent-Length: 3\r\n\r\nabc\r\n--b--\r\n"))
	f.Add(mp, []byte("--b\r\nContent-Disposition: form-data; name=\"response\"\r\n\r\n{}\r\n--b\r\nContent-Disposition: form-data; name=\"stderr\"\r\nContent-Length: 99999999999\r\n\r\nabc\r\n--b--\r\n"))
	f.Add(mp, []byte("--b\r\nContent-Disposition: form-data; name=\"response\"\r\n\r\n{}\r\n--b\r\nContent-Disposition: form-data; name=\"stdout\"\r\n\r\nabc\r\n--b\r\nContent-Disposition: form-data; name=\"stdout\"\r\n\r\nabc\r\n--b--\r\n"))
	f.Add("application/json", []byte(`{"result":{"reason":"exited","stdout":{"text":"x","total":1}}}`))
	f.Fuzz(func(t *testing.T, ctype string, body []byte) {
		resp := &http.Response{Header: http.Header{"Content-Type": {ctype}}, Body: io.NopCloser(bytes.NewReader(body))}
		var out api.ExecResponse
		err := decodeResult(resp, &out, func() (*api.Output, *api.Output) { return &out.Result.Stdout, &out.Result.Stderr }, limit)
		if err != nil {
			return
		}
		if ct, _, _ := bytes.Cut([]byte(ctype), []byte(";")); string(bytes.TrimSpace(ct)) == api.ContentMultipart {
			for _, o := range []api.Output{out.Result.Stdout, out.Result.Stderr} {
				if len(o.Data) > limit {
					t.Fatalf("an output of %d bytes, over the limit of %d", len(o.Data), limit)
				}
			}
		}
	})
}
