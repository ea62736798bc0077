package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/execbox/execbox"
)

// FuzzImageUser: an image's User and its /etc/passwd and /etc/group,
// both from whoever made the image, give a user or an error naming
// "image"; never a panic. A numeric User is always that uid.
func FuzzImageUser(f *testing.F) {
	passwd := "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1001::/home/user:/bin/sh\n"
	group := "root:x:0:\nstaff:x:50:\n"
	for _, u := range []string{"", "root", "user", "1000", "1000:50", "user:staff", "nobody", "4294967295", "a:b:c", ":", "user:"} {
		f.Add(u, passwd, group)
	}
	f.Add("x", "x:y:z:w\n::::\n", ":x:\n")
	f.Fuzz(func(t *testing.T, user, passwd, group string) {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "etc"), 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "etc/passwd"), []byte(passwd), 0o644)
		os.WriteFile(filepath.Join(dir, "etc/group"), []byte(group), 0o644)
		u, err := imageUser(&ImageRoot{Ref: "fuzz", Dir: dir, User: user})
		if err != nil {
			var fe *execbox.FieldError
			if !errors.As(err, &fe) || fe.Field != "image" {
				t.Fatalf("imageUser(%q): %v, want an error naming image", user, err)
			}
			return
		}
		if user == "" && (u.UID != 0 || u.GID != 0) {
			t.Fatalf("no User: %+v, want root", u)
		}
	})
}
