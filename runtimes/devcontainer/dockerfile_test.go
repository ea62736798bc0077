package devcontainer

import (
	"strings"
	"testing"
)

func TestCheckDockerfile(t *testing.T) {
	for _, tt := range []struct {
		df, want string // want: "" for allowed, else a part of the error
	}{
		{"FROM x\nADD . /src\nCOPY a b\n", ""},
		{"FROM x\nADD --chown=1:1 a.tar /opt/\n", ""},
		{"FROM x\nADD http://127.0.0.1:7093/secret /loot\n", "line 2: ADD http://127.0.0.1:7093/secret"},
		{"FROM x\nadd HTTPS://example.com/a /a\n", "ADD HTTPS://example.com/a"},
		{"FROM x\nADD --checksum=sha256:00 \\\n  http://10.0.0.1/x \\\n  /x\n", "line 2: ADD http://10.0.0.1/x"},
		{"FROM x\nADD [\"http://127.0.0.1/a\", \"/a\"]\n", "ADD http://127.0.0.1/a"},
		{"FROM x\nADD git@github.com:o/r.git /r\n", "ADD git@github.com:o/r.git"},
		{"FROM x\nARG U=http://127.0.0.1/a\nADD $U /a\n", "ADD $U"},
		{"FROM x\nADD ${U} /a\n", "ADD ${U}"},
		{"FROM x\nONBUILD ADD http://127.0.0.1/a /a\n", "ADD http://127.0.0.1/a"},
		{"# escape=`\nFROM x\nADD `\n  http://127.0.0.1/a /a\n", "line 3: ADD http://127.0.0.1/a"},
		{"FROM x\nADD \\\n  # a comment\n  http://127.0.0.1/a /a\n", "ADD http://127.0.0.1/a"},
		{"FROM x\nRUN curl http://example.com\n# ADD http://127.0.0.1/a /a\n", ""},
		{"FROM x\nADD [\"a\", \n", "not a JSON array"},
	} {
		err := checkDockerfile([]byte(tt.df))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%q: %v, want allowed", tt.df, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%q: %v, want an error with %q", tt.df, err, tt.want)
		}
	}
}

// FuzzCheckDockerfile: any Dockerfile is judged without a panic, and a
// remote ADD on a line of its own is always refused.
func FuzzCheckDockerfile(f *testing.F) {
	f.Add([]byte("FROM x\nADD . /src\n"))
	f.Add([]byte("# escape=`\nFROM x\nADD `\n http://a/b /c\n"))
	f.Add([]byte("FROM x\nADD [\"a\", \"b\"]\nONBUILD ADD x y\n"))
	f.Fuzz(func(t *testing.T, df []byte) {
		_ = checkDockerfile(df)
		if strings.Contains(string(df), "`") || strings.Contains(string(df), "\\") {
			return // continuations may join the appended line to another
		}
		withRemote := append(append([]byte{}, df...), []byte("\nADD http://127.0.0.1/x /x\n")...)
		if checkDockerfile(withRemote) == nil {
			t.Errorf("%q with a remote ADD appended: allowed", df)
		}
	})
}
