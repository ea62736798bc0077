package api

import "strings"

// Durations travel as milliseconds in fields whose wire name ends in
// "_ms"; the Go API names the same fields without the suffix. These are
// the names that differ.
var msFields = map[string]bool{"timeout": true, "grace_period": true, "cpu_time": true, "idle_timeout": true, "compile_timeout": true}

// mapFields hold user keys after their name (env.NAME, labels.NAME): what
// follows is a key, never renamed.
var mapFields = map[string]bool{"env": true, "labels": true}

// WireField returns the wire name of a Go API field path, as
// *execbox.FieldError names it: "timeout" -> "timeout_ms",
// "setup[0].limits.cpu_time" -> "setup[0].limits.cpu_time_ms". Other
// paths are unchanged.
func WireField(goField string) string {
	return renameField(goField, func(seg string) string {
		if msFields[seg] {
			return seg + "_ms"
		}
		return seg
	})
}

// GoField is the inverse of WireField.
func GoField(wireField string) string {
	return renameField(wireField, func(seg string) string {
		if base, ok := strings.CutSuffix(seg, "_ms"); ok && msFields[base] {
			return base
		}
		return seg
	})
}

func renameField(path string, rename func(string) string) string {
	segs := strings.Split(path, ".")
	for i, s := range segs {
		name, index, _ := strings.Cut(s, "[")
		if mapFields[name] {
			break // the rest is a key of a map
		}
		if index == "" && !strings.Contains(s, "[") {
			segs[i] = rename(name)
		}
	}
	return strings.Join(segs, ".")
}
