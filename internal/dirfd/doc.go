// Package dirfd acts on the entries of one directory through an open
// descriptor of it, never by path and never through a symlink. It is for
// privileged code (the agent: root of the sandbox's user namespace, or
// whoever runs execbox) working in a directory that a less privileged user
// can write, such as a session's private directory: that user can rename
// the directory, or replace any entry in it with a symlink or a hard link
// at any moment, and a privileged open, chown or unlink by path would then
// act on whatever the link points at (a confused deputy).
//
// The rules: the directory is opened once, right after it is made, when
// only its creator can reach it; every entry is a single name relative to
// that descriptor; opens carry O_NOFOLLOW and check the type of what they
// got before using it; files are created O_EXCL, then fchmod'ed and
// fchown'ed through their own descriptor; unlinks are unlinkat.
//
// Dir, for a directory of one's own that a user may write, is Linux-only
// (O_PATH, AT_EMPTY_PATH); OpenNoFollow and SetMtime, for a tree opened as
// an os.Root, fall back elsewhere to what os.Root does.
package dirfd
