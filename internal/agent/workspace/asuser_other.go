//go:build !linux

package workspace

import "github.com/execbox/execbox"

// DoAsUser is ErrUnsupported here: only Linux has a per-thread file
// system identity.
func DoAsUser(uid, gid int, fn func() error) error {
	return execbox.ErrUnsupported
}
