//go:build !unix

package workspace

import "io/fs"

// fileKey identifies a file on the machine.
type fileKey struct{}

// keyOf reports no identity: hard links are not detected here, so each
// link is downloaded as a separate file.
func keyOf(fs.FileInfo) (fileKey, bool) { return fileKey{}, false }

// mayWrite: without owners, any file the workspace holds.
func mayWrite(fs.FileInfo, *owner) bool { return true }

// oDirectory: no such flag here.
const oDirectory = 0
