package devcontainer

import (
	"bufio"
	"bytes"
	"fmt"
	"path"
	"regexp"
	"strings"
)

// ignorer is a build context's .dockerignore, matched as the docker CLI
// matches it (its patternmatcher): patterns of path.Match with ** for any
// number of directories, ! re-including, the last matching pattern
// deciding, and a pattern matching a directory matching what is below.
type ignorer struct {
	patterns []ignorePattern
	negates  bool // some pattern re-includes: an ignored directory is still walked
}

type ignorePattern struct {
	re     *regexp.Regexp
	negate bool
}

// parseDockerignore parses a .dockerignore file.
func parseDockerignore(b []byte) (*ignorer, error) {
	ig := &ignorer{}
	sc := bufio.NewScanner(bytes.NewReader(bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		negate := line[0] == '!'
		if negate {
			line = strings.TrimSpace(line[1:])
		}
		if line != "" {
			line = path.Clean(line)
			if len(line) > 1 && line[0] == '/' {
				line = line[1:]
			}
		}
		re, err := regexp.Compile(ignoreRegexp(line))
		if err != nil {
			return nil, fmt.Errorf(".dockerignore line %d: %q: %v", n, line, err)
		}
		ig.patterns = append(ig.patterns, ignorePattern{re: re, negate: negate})
		ig.negates = ig.negates || negate
	}
	return ig, sc.Err()
}

// ignoreRegexp translates a pattern into a regular expression.
func ignoreRegexp(p string) string {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '*' && i+1 < len(p) && p[i+1] == '*':
			i++
			if i+1 < len(p) && p[i+1] == '/' {
				i++
			}
			if i+1 == len(p) {
				b.WriteString(".*")
			} else {
				b.WriteString("(.*/)?")
			}
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		case c == '\\':
			if i+1 < len(p) {
				i++
				b.WriteString(regexp.QuoteMeta(p[i : i+1]))
			} else {
				b.WriteString(`\\`)
			}
		case strings.IndexByte(".+()|{}$^", c) >= 0:
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteString("$")
	return b.String()
}

// ignored reports whether name (slash-separated, relative to the
// context) is excluded.
func (ig *ignorer) ignored(name string) bool {
	if ig == nil {
		return false
	}
	parents := strings.Split(path.Dir(name), "/")
	matched := false
	for _, p := range ig.patterns {
		if p.negate != matched {
			continue
		}
		m := p.re.MatchString(name)
		if !m && path.Dir(name) != "." {
			for i := range parents {
				if p.re.MatchString(strings.Join(parents[:i+1], "/")) {
					m = true
					break
				}
			}
		}
		if m {
			matched = !p.negate
		}
	}
	return matched
}
