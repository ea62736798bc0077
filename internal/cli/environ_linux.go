package cli

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// scrubEnviron blanks the value of the variable name in the process's
// initial environment block, the memory /proc/PID/environ shows.
// os.Unsetenv only changes Go's copy: the kernel keeps showing the block
// the process was started with, readable by every process of the same
// user (and root) for as long as the process lives. The block is in the
// process's own writable stack, so writing /proc/self/mem at the
// addresses /proc/self/stat gives (env_start, env_end) blanks it in
// place, without privilege and without re-executing.
func scrubEnviron(name string) error {
	start, end, err := environBounds()
	if err != nil {
		return err
	}
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer mem.Close()
	block := make([]byte, end-start)
	if _, err := mem.ReadAt(block, int64(start)); err != nil {
		return fmt.Errorf("read the environment block: %w", err)
	}
	prefix := []byte(name + "=")
	off := 0
	for _, entry := range bytes.SplitAfter(block, []byte{0}) {
		if bytes.HasPrefix(entry, prefix) {
			n := len(entry) - len(prefix)
			if entry[len(entry)-1] == 0 {
				n--
			}
			if _, err := mem.WriteAt(make([]byte, n), int64(start)+int64(off+len(prefix))); err != nil {
				return fmt.Errorf("blank $%s in the environment block: %w", name, err)
			}
		}
		off += len(entry)
	}
	return nil
}

// environBounds returns env_start and env_end of /proc/self/stat (fields
// 50 and 51, counting from 1; the fields after the command name, which
// may hold spaces, count from its closing parenthesis).
func environBounds() (start, end uint64, err error) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/self/stat: no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): field n is f[n-3].
	if len(f) < 51-3+1 {
		return 0, 0, fmt.Errorf("/proc/self/stat: %d fields, want env_start and env_end", len(f)+2)
	}
	if start, err = strconv.ParseUint(f[50-3], 10, 64); err == nil {
		end, err = strconv.ParseUint(f[51-3], 10, 64)
	}
	if err == nil && end < start {
		err = fmt.Errorf("env_end %d before env_start %d", end, start)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("/proc/self/stat: %w", err)
	}
	return start, end, nil
}
