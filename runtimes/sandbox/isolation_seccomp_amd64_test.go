//go:build linux

package sandbox_test

import "golang.org/x/sys/unix"

// archSeccompCalls are the refused calls only amd64 has.
var archSeccompCalls = []seccompCall{
	// Reading the LDT (func 0) into a NULL buffer of size 0 succeeds
	// without the filter.
	{"modify_ldt", unix.SYS_MODIFY_LDT, []uint64{0, 0, 0}, unix.EPERM},
	{"iopl", unix.SYS_IOPL, []uint64{0}, unix.EPERM},
}
