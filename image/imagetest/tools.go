package imagetest

import (
	"archive/tar"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// ToolImage is busybox, bash and the host's Python 3.11 in one image:
// what the conformance suite runs (sh, bash, sleep, python3, ...).
var ToolImage = sync.OnceValues(func() (v1.Image, error) {
	bb, err := BusyboxImage()
	if err != nil {
		return nil, err
	}
	py, err := PythonImage()
	if err != nil {
		return nil, err
	}
	bash, err := HostFilesImage("/bin/bash", "/usr/bin/python3")
	if err != nil {
		return nil, err
	}
	applets, err := exec.Command(Busybox, "--list").Output()
	if err != nil {
		return nil, err
	}
	var links []Entry
	for _, a := range strings.Fields(string(applets)) {
		if a != "bash" && a != "busybox" && !slices.Contains(BusyboxApplets, a) {
			links = append(links, Entry{Header: tar.Header{Name: "bin/" + a, Typeflag: tar.TypeSymlink, Linkname: "busybox"}})
		}
	}
	all, err := Image(v1.Config{}, Tar(links...))
	if err != nil {
		return nil, err
	}
	img := bb
	for _, add := range []v1.Image{all, py, bash} {
		ls, err := add.Layers()
		if err != nil {
			return nil, err
		}
		if img, err = mutate.AppendLayers(img, ls...); err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	return mutate.ConfigFile(img, cf)
})

// WithUser is img with one more layer, an /etc/passwd and /etc/group
// that name root and the user name (uid, gid), and with that user as its
// config's User: an image whose commands run as a named user.
func WithUser(img v1.Image, name string, uid, gid int) (v1.Image, error) {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/bin/sh\n%s:x:%d:%d::/home/%s:/bin/sh\n", name, uid, gid, name)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", name, gid)
	layer := Tar(
		Entry{Header: tar.Header{Name: "etc/", Typeflag: tar.TypeDir}},
		Entry{Header: tar.Header{Name: "etc/passwd", Typeflag: tar.TypeReg}, Body: passwd},
		Entry{Header: tar.Header{Name: "etc/group", Typeflag: tar.TypeReg}, Body: group},
	)
	img, err := mutate.AppendLayers(img, Layer(layer))
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Config.User = name
	return mutate.ConfigFile(img, cf)
}
