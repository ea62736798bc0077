//go:build linux && !amd64 && !arm64

package seccomp

const (
	auditArch = 0
	x32Check  = false
)

var deniedArch []uintptr
