//go:build !linux

package workspace

import "os"

// capacity: not known here; Download is not bounded by it.
func capacity(*os.Root) int64 { return -1 }
