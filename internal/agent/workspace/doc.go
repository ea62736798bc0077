// Package workspace confines file access to a sandbox's workspace
// directory. It is the one implementation of path resolution, file
// operations, tar upload/download, and snapshots: the local runtime
// uses it in-process, and the execbox agent uses it inside every isolation
// boundary, so every runtime resolves paths the same way.
//
// # Confinement model
//
// A *Workspace holds an [os.Root] opened on the workspace directory, and
// every access to the tree goes through it. Paths are checked twice:
//
//  1. Lexically, by [Workspace.Resolve]: a path is relative to the
//     workspace or absolute under it; NUL bytes are invalid
//     (ErrInvalidArgument), and ".." escapes and absolute paths elsewhere
//     are refused with ErrPermission. The result is a clean relative path.
//  2. Physically, by os.Root at the moment of the system call. os.Root
//     resolves a path one component at a time with openat(2) relative to
//     the directory descriptor of the root, never by handing a whole path
//     to the kernel. It follows a symlink only if its target, resolved the
//     same way, stays inside the root; absolute symlink targets and ".."
//     above the root are refused (reported as ErrPermission).
//
// The second check is the one that matters. The classic escape is the
// planted symlink: a command in the sandbox runs `ln -s / link` (or
// `ln -s ../other-sandbox link`), then asks the file API, which runs with
// the host's privileges, to write link/etc/cron.d/x. A check of the string
// "link/etc/cron.d/x" finds nothing wrong, and open(2) follows the link
// out. Checking the resolved path first (filepath.EvalSymlinks, then
// open) does not help either: the command can swap a directory for a
// symlink between the check and the use. os.Root has no such window
// because each component is opened relative to the descriptor of the
// previous one, with O_NOFOLLOW, and symlinks are expanded by os.Root
// itself inside the root.
//
// Consequences callers can rely on:
//
//   - Symlinks are created as they are (a tar entry may point
//     anywhere), but no operation of this package ever follows one out of
//     the workspace; a symlink with an absolute target is never followed,
//     even if it points inside (the workspace has a different absolute
//     path inside and outside an isolation boundary).
//   - Files are replaced by writing a temporary file in the same directory
//     and renaming it over the old one, so a hard link or symlink planted
//     at the destination is replaced, not written through. WriteFile is
//     the one exception: it follows a final symlink inside the workspace
//     and overwrites its target in place, as an editor would, but refuses
//     a target with several hard links, and (after Chown) one the owner
//     could not write itself.
//   - Modes, owners and times of what this package creates are set through
//     a descriptor of it (fchmod, fchown, futimens; the last component
//     opened O_NOFOLLOW by dirfd.OpenNoFollow, since os.Root ignores that
//     flag), never by name: a directory swapped for a symlink meanwhile
//     does not lend its mode to the symlink's target.
//   - A privileged caller serving a workspace that belongs to a less
//     privileged user wraps Files in [AsUser]: each call then runs with
//     that user's file system identity, so nothing the user planted makes
//     it read, write, create or remove what the user could not.
//   - Reading a hard link planted by a command reads the shared file. That
//     gives nothing away: Linux's protected_hardlinks (on by default) lets
//     a user link only a file it owns or can read and write.
//   - Upload is confined to its target directory, not only to the
//     workspace: it works through an os.Root opened on that directory.
//   - Walks (Download, Snapshot, Chown) open each directory through the
//     root of its parent and check that it is the same file Lstat
//     described, so a directory swapped for a symlink during the walk is
//     skipped rather than followed.
//
// The check in [Workspace.CheckDir] is of a different nature: it returns
// a host path for a process's working directory, which the kernel resolves
// again when the process starts. It guards against mistakes and against
// symlinks planted before the call. Processes themselves are confined by
// the runtime's isolation boundary, not by this package.
//
// # Errors
//
// Errors carry an execbox kind for errors.Is: ErrNotFound for a missing
// file, ErrPermission for an escape or a refused access, ErrInvalidArgument
// for a request that cannot succeed as asked (the path exists, is a
// directory, is not a directory, is not empty), ErrResourceExhausted for a
// full disk, exhausted descriptors or a file over the read limit, and
// ErrClosed after Close. Errors from the operating system also match the
// underlying error (fs.ErrNotExist, fs.ErrExist, syscall.ENOSPC, ...), in
// process only: across the wire only the kind survives. Problems found in a
// request before touching the disk are *execbox.FieldError values naming the
// field. Context errors are returned unchanged.
//
// # Ownership and modes
//
// Permission bits are applied exactly (the process umask does not apply).
// Setuid, setgid and sticky bits are never set by this package. After
// [Workspace.Chown], everything created through the Workspace is owned by
// that user too, so a command running as that user can change it.
package workspace
