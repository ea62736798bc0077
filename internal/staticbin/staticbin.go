// Package staticbin tells whether a program can run where the host's
// dynamic loader and C library are not: inside an image's root or a
// container, where execbox's agent runs from a host binary.
package staticbin

import (
	"debug/elf"
	"strings"
)

// Interpreter returns the program interpreter (PT_INTERP) of the ELF
// file at path, "" for a static one.
func Interpreter(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return "", err
			}
			return strings.TrimRight(string(b), "\x00"), nil
		}
	}
	return "", nil
}
