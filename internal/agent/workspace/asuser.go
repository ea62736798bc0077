package workspace

import (
	"context"
	"io"

	"github.com/execbox/execbox"
)

// AsUser returns f with every operation done under the file system
// identity of uid and gid (setfsuid and setfsgid on a thread locked to the
// call): a privileged caller serving the files of a workspace that belongs
// to a less privileged command user then cannot be steered by what that
// user planted (a symlink or a directory swapped for one) into touching
// anything the user could not touch itself. It also takes the file
// capabilities (CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER…) out of the
// thread's effective set for the call. A call fails with ErrPermission
// if the caller cannot take that identity, and with ErrUnsupported where
// the system has no such thing (anything but Linux).
func AsUser(f execbox.Files, uid, gid int) execbox.Files {
	return userFiles{f, uid, gid}
}

type userFiles struct {
	f        execbox.Files
	uid, gid int
}

func (u userFiles) do(fn func() error) error { return DoAsUser(u.uid, u.gid, fn) }

func (u userFiles) ReadFile(ctx context.Context, p string, o execbox.ReadOptions) (b []byte, err error) {
	err = u.do(func() error { b, err = u.f.ReadFile(ctx, p, o); return err })
	return b, err
}

func (u userFiles) WriteFile(ctx context.Context, p string, data []byte, o execbox.WriteOptions) error {
	return u.do(func() error { return u.f.WriteFile(ctx, p, data, o) })
}

func (u userFiles) Stat(ctx context.Context, p string) (fi execbox.FileInfo, err error) {
	err = u.do(func() error { fi, err = u.f.Stat(ctx, p); return err })
	return fi, err
}

func (u userFiles) List(ctx context.Context, p string) (l []execbox.FileInfo, err error) {
	err = u.do(func() error { l, err = u.f.List(ctx, p); return err })
	return l, err
}

func (u userFiles) Mkdir(ctx context.Context, p string, o execbox.MkdirOptions) error {
	return u.do(func() error { return u.f.Mkdir(ctx, p, o) })
}

func (u userFiles) Remove(ctx context.Context, p string, o execbox.RemoveOptions) error {
	return u.do(func() error { return u.f.Remove(ctx, p, o) })
}

func (u userFiles) Upload(ctx context.Context, p string, r io.Reader) error {
	return u.do(func() error { return u.f.Upload(ctx, p, r) })
}

func (u userFiles) Download(ctx context.Context, p string, w io.Writer) error {
	return u.do(func() error { return u.f.Download(ctx, p, w) })
}
