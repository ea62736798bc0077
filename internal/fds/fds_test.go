package fds

import (
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

func TestCloseExecFrom(t *testing.T) {
	fd, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY, 0) // no O_CLOEXEC
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	before, err := Leaky(3)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(before, fd) {
		t.Fatalf("Leaky(3) = %v, want it to list %d", before, fd)
	}
	if err := CloseExecFrom(3); err != nil {
		t.Fatal(err)
	}
	after, err := Leaky(3)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 0 {
		t.Errorf("after CloseExecFrom(3), Leaky(3) = %v", after)
	}
	// The descriptor itself stays open.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
		t.Errorf("descriptor %d closed: %v", fd, err)
	}
}
