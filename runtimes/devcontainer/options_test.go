package devcontainer_test

import (
	"errors"
	"testing"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/runtimes/devcontainer"
)

// TestAllowedVolumesChecked: runtimes.devcontainer.allowed_volumes holds
// volume names.
func TestAllowedVolumesChecked(t *testing.T) {
	for _, names := range [][]string{{""}, {"a/b"}, {"ok", "nul\x00"}} {
		_, err := devcontainer.New(devcontainer.Options{AllowedVolumes: names})
		var fe *execbox.FieldError
		if !errors.As(err, &fe) || fe.Field != "runtimes.devcontainer.allowed_volumes" || !errors.Is(err, execbox.ErrInvalidArgument) {
			t.Errorf("allowed_volumes %q: %v, want an invalid argument naming it", names, err)
		}
	}
	if _, err := devcontainer.New(devcontainer.Options{AllowedVolumes: []string{"my-project_node-modules.1"}}); err != nil {
		t.Errorf("a volume's name: %v", err)
	}
}
