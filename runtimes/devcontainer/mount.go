package devcontainer

import (
	"encoding/csv"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// mountSpec is a mount of devcontainer.json ("mounts", "workspaceMount"):
// Docker's --mount syntax or the spec's object form.
type mountSpec struct {
	typ      string // bind, volume or tmpfs
	source   string // a host path (bind), a volume's name (volume, "" for an anonymous one)
	target   string // absolute, in the container
	readOnly bool
	noCopy   bool   // volume-nocopy
	tmpSize  int64  // tmpfs-size, bytes
	tmpMode  uint32 // tmpfs-mode
	raw      string // the string form, until substituted and parsed
}

// parseMountString parses Docker's --mount syntax: comma-separated
// key=value fields (CSV, so a value with a comma is quoted), as the
// reference tools pass it to docker run. The type defaults to volume,
// as Docker's does.
func parseMountString(s string) (mountSpec, error) {
	m := mountSpec{typ: "volume"}
	r := csv.NewReader(strings.NewReader(s))
	r.FieldsPerRecord = -1
	fields, err := r.Read()
	if err != nil {
		return m, fmt.Errorf("%q is not a mount: %v", s, err)
	}
	for _, f := range fields {
		key, val, hasVal := strings.Cut(f, "=")
		key = strings.ToLower(strings.TrimSpace(key))
		boolVal := func() (bool, error) {
			if !hasVal {
				return true, nil
			}
			switch strings.ToLower(val) {
			case "1", "true":
				return true, nil
			case "0", "false":
				return false, nil
			}
			return false, fmt.Errorf("%s=%q: want true or false", key, val)
		}
		switch key {
		case "type":
			m.typ = val
		case "source", "src":
			m.source = val
		case "target", "destination", "dst":
			m.target = val
		case "readonly", "ro":
			if m.readOnly, err = boolVal(); err != nil {
				return m, err
			}
		case "consistency": // macOS's; no effect on Linux
		case "volume-nocopy":
			if m.noCopy, err = boolVal(); err != nil {
				return m, err
			}
		case "tmpfs-size":
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil || n < 0 {
				return m, fmt.Errorf("tmpfs-size=%q: want a number of bytes", val)
			}
			m.tmpSize = n
		case "tmpfs-mode":
			n, err := strconv.ParseUint(val, 8, 32)
			if err != nil || n > 0o7777 {
				return m, fmt.Errorf("tmpfs-mode=%q: want an octal mode", val)
			}
			m.tmpMode = uint32(n)
		case "":
			return m, fmt.Errorf("%q has an empty field", s)
		default:
			return m, fmt.Errorf("mount option %q is not supported by the devcontainer runtime (type, source, target, readonly, consistency, volume-nocopy, tmpfs-size, tmpfs-mode)", key)
		}
	}
	return m, m.check()
}

// check checks a mount's fields, whatever form it came in.
func (m *mountSpec) check() error {
	if strings.IndexByte(m.source+m.target+m.typ, 0) >= 0 {
		return errors.New("contains a NUL byte")
	}
	switch m.typ {
	case "bind":
		if m.source == "" {
			return errors.New("a bind mount needs a source")
		}
		if !path.IsAbs(m.source) {
			return fmt.Errorf("the source %q of a bind mount must be an absolute host path", m.source)
		}
	case "volume":
	case "tmpfs":
		if m.source != "" {
			return errors.New("a tmpfs mount has no source")
		}
	case "":
		return errors.New("a mount needs a type (bind, volume or tmpfs)")
	default:
		return fmt.Errorf("mount type %q is not supported (bind, volume or tmpfs)", m.typ)
	}
	if m.noCopy && m.typ != "volume" || (m.tmpSize != 0 || m.tmpMode != 0) && m.typ != "tmpfs" {
		return fmt.Errorf("option for another type of mount than %s", m.typ)
	}
	t := m.target
	switch {
	case t == "":
		return errors.New("a mount needs a target")
	case !path.IsAbs(t):
		return fmt.Errorf("the target %q must be an absolute path in the container", t)
	case path.Clean(t) == "/":
		return errors.New("the target must not be /")
	case path.Clean(t) == "/.execbox" || strings.HasPrefix(path.Clean(t), "/.execbox/"):
		return fmt.Errorf("the target %q is execbox's (the agent's directory)", t)
	}
	return nil
}
