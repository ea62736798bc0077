//go:build linux && !amd64

package sandbox_test

// archSeccompCalls are the refused calls only some architectures have.
var archSeccompCalls []seccompCall
