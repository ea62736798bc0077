package cli

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/execbox/execbox/api"
)

// TestServeOpenAPI: execbox serve serves the protocol's OpenAPI document
// without its token, as it does its version; the rest still needs it.
func TestServeOpenAPI(t *testing.T) {
	const tokenVar = "EXECBOX_TEST_OPENAPI_TOKEN"
	t.Setenv(tokenVar, "tok")
	url, _ := startServe(t, "--listen", "127.0.0.1:0", "--token-env", tokenVar)
	get := func(path string) (*http.Response, []byte) {
		t.Helper()
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}
	resp, b := get("/v1/openapi.yaml")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != api.ContentYAML || !bytes.Equal(b, api.OpenAPI) {
		t.Fatalf("GET /v1/openapi.yaml without a token: %d %q, %d bytes; want 200 %s and api.OpenAPI (%d bytes)",
			resp.StatusCode, resp.Header.Get("Content-Type"), len(b), api.ContentYAML, len(api.OpenAPI))
	}
	var doc struct {
		OpenAPI string         `yaml:"openapi"`
		Paths   map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil || doc.OpenAPI != "3.1.0" || doc.Paths["/v1/sandboxes"] == nil {
		t.Errorf("the served document: openapi %q, %d paths, %v", doc.OpenAPI, len(doc.Paths), err)
	}
	if resp, _ := get("/v1/sandboxes"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/sandboxes without a token: %d, want 401", resp.StatusCode)
	}
}
