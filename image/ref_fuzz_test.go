//go:build linux

package image

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/execbox/execbox"
)

// FuzzParseRef: a reference parses to a registry's or to an absolute
// local path, or fails with ErrInvalidArgument naming "image"; never a
// panic, and never a network access (parseRef has none).
func FuzzParseRef(f *testing.F) {
	for _, s := range []string{"python:3.12-slim", "localhost:5000/team/env@sha256:" + strings.Repeat("a", 64),
		"./layout:tag", "/abs/layout@sha256:" + strings.Repeat("0", 64), "../x.tar:repo:tag", "", " x", "a\x00b",
		"UPPER/case", "reg:99999/x", ".", "..", "x@sha256:short", "ghcr.io/a/b:c@sha256:" + strings.Repeat("f", 64)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		src, err := parseRef(ref)
		if err != nil {
			var fe *execbox.FieldError
			if !errors.Is(err, execbox.ErrInvalidArgument) || !errors.As(err, &fe) || fe.Field != "image" {
				t.Fatalf("parseRef(%q): %v, want ErrInvalidArgument naming image", ref, err)
			}
			return
		}
		switch {
		case src.remote != nil:
			if isLocal(ref) || src.key != src.remote.Name() {
				t.Fatalf("parseRef(%q): registry %+v", ref, src)
			}
		case !filepath.IsAbs(src.path) || !filepath.IsAbs(src.key) || !isLocal(ref):
			t.Fatalf("parseRef(%q): local %+v, want absolute paths", ref, src)
		}
	})
}
