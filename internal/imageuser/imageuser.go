// Package imageuser resolves the user an OCI image's config names into
// the numeric ids its commands run as, from the image's own files.
package imageuser

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/execbox/execbox"
)

// Resolve returns the user an image's config says its commands run as
// (its User: "name", "uid", "name:group" or "uid:gid"), root where it
// says none, as Docker does. Names are looked up in the image's own
// /etc/passwd and /etc/group, which open returns (names relative to the
// image's root, "etc/passwd"); each is read bounded. ref names the image
// in errors, which are *execbox.FieldError naming "image".
func Resolve(spec, ref string, open func(name string) (io.ReadCloser, error)) (execbox.User, error) {
	if spec == "" {
		return execbox.User{}, nil
	}
	bad := func(format string, a ...any) error {
		return &execbox.FieldError{Field: "image", Kind: execbox.ErrInvalidArgument,
			Problem: fmt.Sprintf("user %q of image %s: ", spec, ref) + fmt.Sprintf(format, a...)}
	}
	name, group, hasGroup := strings.Cut(spec, ":")
	var u execbox.User
	uid, err := strconv.ParseUint(name, 10, 32)
	if err == nil {
		u.UID, u.GID = uint32(uid), uint32(uid)
		if e, ok := lookupID(open, "etc/passwd", name, 2); ok {
			if g, err := strconv.ParseUint(e[3], 10, 32); err == nil {
				u.GID = uint32(g)
			}
		}
	} else {
		e, ok := lookupID(open, "etc/passwd", name, 0)
		if !ok {
			return u, bad("no such user in its /etc/passwd")
		}
		uid, err1 := strconv.ParseUint(e[2], 10, 32)
		gid, err2 := strconv.ParseUint(e[3], 10, 32)
		if err1 != nil || err2 != nil {
			return u, bad("its /etc/passwd entry has no numeric uid and gid")
		}
		u.UID, u.GID = uint32(uid), uint32(gid)
	}
	if hasGroup {
		gid, err := strconv.ParseUint(group, 10, 32)
		if err != nil {
			e, ok := lookupID(open, "etc/group", group, 0)
			if !ok {
				return u, bad("no such group in its /etc/group")
			}
			if gid, err = strconv.ParseUint(e[2], 10, 32); err != nil {
				return u, bad("its /etc/group entry has no numeric gid")
			}
		}
		u.GID = uint32(gid)
	}
	return u, nil
}

// maxIDFile bounds the /etc/passwd and /etc/group read from an image.
const maxIDFile = 16 << 20

// lookupID returns the fields of the first line of the colon-separated
// file (passwd or group form) whose field col is key.
func lookupID(open func(string) (io.ReadCloser, error), file, key string, col int) ([]string, bool) {
	f, err := open(file)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	// Bounded: the image says what size its file claims (a sparse one
	// costs it nothing), not how much this process allocates.
	b, err := io.ReadAll(io.LimitReader(f, maxIDFile+1))
	if err != nil || len(b) > maxIDFile {
		return nil, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Split(line, ":")
		if len(f) >= 4 && f[col] == key {
			return f, true
		}
	}
	return nil, false
}
