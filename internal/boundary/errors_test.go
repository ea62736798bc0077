package boundary

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/execbox/execbox"
)

func TestCreateError(t *testing.T) {
	enospc := fmt.Errorf("state record: %w", &os.PathError{Op: "write", Path: "/x", Err: syscall.ENOSPC})
	invalid := execbox.Invalid("workspace", "no")
	other := errors.New("something else")
	for _, tc := range []struct {
		err       error
		exhausted bool
	}{
		{enospc, true},
		{fmt.Errorf("x: %w", syscall.EMFILE), true},
		{fmt.Errorf("x: %w", syscall.EAGAIN), true},
		{invalid, false},
		{fmt.Errorf("%w: %w", invalid, syscall.ENOSPC), false}, // a kind already: kept
		{other, false},
		{context.Canceled, false},
	} {
		got := CreateError(tc.err)
		if errors.Is(got, execbox.ErrResourceExhausted) != tc.exhausted {
			t.Errorf("CreateError(%v) = %v; exhausted %v, want %v", tc.err, got, !tc.exhausted, tc.exhausted)
		}
		if !errors.Is(got, tc.err) || got.Error() != tc.err.Error() {
			t.Errorf("CreateError(%v) = %v: not the same error", tc.err, got)
		}
	}
	if CreateError(nil) != nil {
		t.Error("CreateError(nil) is not nil")
	}
}
