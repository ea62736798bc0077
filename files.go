package execbox

import (
	"context"
	"io"
	"io/fs"
	"time"
)

// Files accesses a sandbox's workspace. Every path is relative to the
// workspace (or absolute inside it) and is resolved inside it: "..",
// absolute paths elsewhere and symlinks pointing out are refused with
// ErrPermission. A missing file is ErrNotFound.
type Files interface {
	// ReadFile returns the content of a regular file of at most limit
	// bytes (zero means 64 MiB); a larger file is ErrResourceExhausted.
	ReadFile(ctx context.Context, path string, opts ReadOptions) ([]byte, error)
	// WriteFile creates or replaces a file.
	WriteFile(ctx context.Context, path string, data []byte, opts WriteOptions) error
	// Stat describes a file without following a final symlink.
	Stat(ctx context.Context, path string) (FileInfo, error)
	// List returns the entries of a directory, sorted by name.
	List(ctx context.Context, path string) ([]FileInfo, error)
	// Mkdir creates a directory, and its parents with opts.Parents.
	Mkdir(ctx context.Context, path string, opts MkdirOptions) error
	// Remove removes a file or empty directory, or a tree with opts.Recursive.
	Remove(ctx context.Context, path string, opts RemoveOptions) error
	// Upload unpacks a tar stream into the directory path (created if
	// missing). Entries leaving the directory are refused.
	Upload(ctx context.Context, path string, tar io.Reader) error
	// Download writes the tree at path as a tar stream to w. Its files'
	// bytes add up to at most the size of the workspace's file system:
	// sparse files holding more are ErrResourceExhausted.
	Download(ctx context.Context, path string, w io.Writer) error
}

// DefaultReadLimit bounds ReadFile when ReadOptions.Limit is zero.
const DefaultReadLimit = 64 << 20

// ReadOptions for Files.ReadFile.
type ReadOptions struct {
	// Limit is the largest file accepted; zero means DefaultReadLimit.
	Limit int64
}

// WriteOptions for Files.WriteFile.
type WriteOptions struct {
	// Mode is the permission of a new file; zero means 0644.
	Mode fs.FileMode
	// Parents creates missing parent directories.
	Parents bool
}

// MkdirOptions for Files.Mkdir.
type MkdirOptions struct {
	// Mode of the new directories; zero means 0755.
	Mode fs.FileMode
	// Parents creates missing parents and accepts an existing directory.
	Parents bool
}

// RemoveOptions for Files.Remove.
type RemoveOptions struct {
	// Recursive removes a directory and everything in it.
	Recursive bool
}

// FileInfo describes a file in the workspace.
type FileInfo struct {
	// Path is relative to the workspace, with forward slashes.
	Path    string
	Name    string
	Size    int64
	Mode    fs.FileMode
	ModTime time.Time
	// Target is the destination of a symlink.
	Target string
}

// IsDir reports whether the file is a directory.
func (fi FileInfo) IsDir() bool { return fi.Mode.IsDir() }
