//go:build linux

package seccomp

import "golang.org/x/sys/unix"

const (
	auditArch = unix.AUDIT_ARCH_X86_64
	x32Check  = true
)

var deniedArch = []uintptr{
	unix.SYS_USELIB, unix.SYS_USTAT, unix.SYS_SYSFS, unix.SYS__SYSCTL,
	unix.SYS_IOPL, unix.SYS_IOPERM,
	unix.SYS_CREATE_MODULE, unix.SYS_QUERY_MODULE, unix.SYS_GET_KERNEL_SYMS,
}
