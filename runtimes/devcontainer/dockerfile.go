package devcontainer

import (
	"encoding/json"
	"fmt"
	"strings"
)

// checkDockerfile refuses a Dockerfile whose ADD instructions fetch
// anything but files of the build context: a URL or a git repository,
// which the daemon fetches from the host's own network whatever the
// build's network mode (that applies to RUN only), so a devcontainer.json
// written by a sandboxed command could read the host's loopback services
// into an image it runs in. A source holding a variable is refused too,
// since a build argument could make it a URL. Heredoc sources are
// content, and COPY never fetches.
func checkDockerfile(df []byte) error {
	escape := byte('\\')
	lines := strings.Split(strings.ReplaceAll(string(df), "\r\n", "\n"), "\n")
	directives := true
	var inst strings.Builder
	lineNo, start := 0, 0
	for lineNo < len(lines) {
		line := lines[lineNo]
		lineNo++
		trimmed := strings.TrimSpace(line)
		if inst.Len() == 0 {
			if directives {
				if d, ok := strings.CutPrefix(trimmed, "#"); ok {
					k, v, found := strings.Cut(strings.TrimSpace(d), "=")
					if found && strings.EqualFold(strings.TrimSpace(k), "escape") && strings.TrimSpace(v) == "`" {
						escape = '`'
					}
					continue
				}
				directives = false
			}
			if trimmed == "" || strings.HasPrefix(trimmed, "#") {
				continue
			}
			start = lineNo
		} else if strings.HasPrefix(trimmed, "#") {
			continue // a comment inside a continued instruction
		}
		if strings.HasSuffix(trimmed, string(escape)) {
			inst.WriteString(strings.TrimSuffix(trimmed, string(escape)))
			inst.WriteByte(' ')
			continue
		}
		inst.WriteString(trimmed)
		if err := checkInstruction(inst.String()); err != nil {
			return fmt.Errorf("line %d: %w", start, err)
		}
		inst.Reset()
	}
	if inst.Len() > 0 {
		return checkInstruction(inst.String())
	}
	return nil
}

// checkInstruction checks one instruction, its continuation lines joined.
func checkInstruction(inst string) error {
	fields := strings.Fields(inst)
	if len(fields) == 0 {
		return nil
	}
	if strings.EqualFold(fields[0], "ONBUILD") {
		return checkInstruction(strings.TrimSpace(inst[len(fields[0]):]))
	}
	if !strings.EqualFold(fields[0], "ADD") {
		return nil
	}
	rest := strings.TrimSpace(inst[len(fields[0]):])
	args := strings.Fields(rest)
	for len(args) > 0 && strings.HasPrefix(args[0], "--") {
		rest = strings.TrimSpace(strings.TrimPrefix(rest, args[0]))
		args = args[1:]
	}
	if strings.HasPrefix(rest, "[") {
		var list []string
		if err := json.Unmarshal([]byte(rest), &list); err != nil {
			return fmt.Errorf("ADD %s: not a JSON array of strings: %v", rest, err)
		}
		args = list
	}
	if len(args) < 2 {
		return nil // the builder refuses it
	}
	for _, src := range args[:len(args)-1] {
		if strings.HasPrefix(src, "<<") {
			continue // a heredoc: the content follows
		}
		if strings.Contains(src, "://") || strings.HasPrefix(src, "git@") || strings.ContainsAny(src, "$") {
			return fmt.Errorf("ADD %s: fetches what is not in the build context (a URL, a git repository, or a variable that could be one), which the daemon reads from the host's network; download it in a RUN step, or COPY it from the context", src)
		}
	}
	return nil
}
