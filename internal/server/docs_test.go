package server_test

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/internal/server"
)

// serverDoc is docs/server.md.
func serverDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/server.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// shellCommands are the commands of the sh code blocks of doc, each with
// its continuation lines joined.
func shellCommands(doc string) []string {
	var cmds []string
	for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(doc, -1) {
		joined := strings.ReplaceAll(block[1], "\\\n", " ")
		for line := range strings.Lines(joined) {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				cmds = append(cmds, line)
			}
		}
	}
	return cmds
}

// TestServerDocCurl: every curl of docs/server.md that sends a body says
// it is JSON (the server refuses another Content-Type), and every one
// reaches the port execbox serve listens on by default, as the rest do.
func TestServerDocCurl(t *testing.T) {
	n := 0
	for _, cmd := range shellCommands(serverDoc(t)) {
		if !strings.HasPrefix(strings.TrimPrefix(cmd, "$ "), "curl ") {
			continue
		}
		n++
		if strings.Contains(cmd, " -d ") && !strings.Contains(cmd, "Content-Type: application/json") {
			t.Errorf("curl with a body and no Content-Type: %s", cmd)
		}
		for _, m := range regexp.MustCompile(`(?:localhost|127\.0\.0\.1):(\d+)`).FindAllStringSubmatch(cmd, -1) {
			if m[1] != "7070" {
				t.Errorf("curl to port %s, not execbox serve's 7070: %s", m[1], cmd)
			}
		}
	}
	if n < 10 {
		t.Errorf("found %d curl commands: the parsing is wrong", n)
	}
}

// TestServerDocOpenAPI: the version the guide states is the one served
// (api.Revision, the document's info.version), and no example saves the
// document as execbox.yaml, the configuration file's name.
func TestServerDocOpenAPI(t *testing.T) {
	doc := serverDoc(t)
	served := regexp.MustCompile(`(?m)^  version: "([^"]+)"`).FindSubmatch(api.OpenAPI)
	if served == nil || string(served[1]) != fmt.Sprintf("1.%d", api.Revision) {
		t.Fatalf("openapi.yaml info.version %q, api.Revision %d", served, api.Revision)
	}
	want := fmt.Sprintf("(`1.%d`: v1, revision %d;", api.Revision, api.Revision)
	if !strings.Contains(strings.Join(strings.Fields(doc), " "), want) {
		t.Errorf("docs/server.md does not state the served version as %q", want)
	}
	for _, cmd := range shellCommands(doc) {
		if strings.Contains(cmd, "openapi") && regexp.MustCompile(`(-o|openapi-typescript) execbox\.yaml`).MatchString(cmd) {
			t.Errorf("an example saves the OpenAPI document as execbox.yaml: %s", cmd)
		}
	}
}

// TestServerDocLimits: the request size limits the guide states are the
// server's.
func TestServerDocLimits(t *testing.T) {
	doc := serverDoc(t)
	for _, row := range []struct {
		what  string
		limit int64
	}{
		{"| a JSON request body", server.DefaultMaxJSONBody},
		{"| a file write", server.DefaultMaxFileBody},
	} {
		// The limits table's row; the memory model's rows start alike.
		want := fmt.Sprintf("| %d MiB |", row.limit>>20)
		found := false
		for _, line := range strings.Split(doc, "\n") {
			found = found || strings.HasPrefix(line, row.what) && strings.Contains(line, want)
		}
		if !found {
			t.Errorf("docs/server.md has no row %q stating %s", row.what, want)
		}
	}
}
