package owner

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkRecord is what a sandbox's record costs (Write at create,
// Remove at close), against the baseline of a temporary workspace's
// directory made and removed, which every local Create and Close pays.
func BenchmarkRecord(b *testing.B) {
	dir := b.TempDir()
	b.Run("baseline-mkdirtemp", func(b *testing.B) {
		for b.Loop() {
			d, err := os.MkdirTemp(dir, "execbox-")
			if err != nil {
				b.Fatal(err)
			}
			os.Remove(d)
		}
	})
	b.Run("write-remove", func(b *testing.B) {
		d, err := OpenDir(filepath.Join(dir, "state"))
		if err != nil {
			b.Fatal(err)
		}
		defer d.Close()
		for b.Loop() {
			if err := d.Write("sb-0123456789ab", map[string]string{"temp_parent": dir}); err != nil {
				b.Fatal(err)
			}
			if err := d.Remove("sb-0123456789ab"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
