package undo

import (
	"errors"
	"slices"
	"testing"
)

func TestStack(t *testing.T) {
	var got []int
	run := func(fail, release bool) (err error) {
		var u Stack
		defer u.OnError(&err)
		u.Add(func() { got = append(got, 1) })
		u.Add(func() { got = append(got, 2) })
		if release {
			u.Release()
		}
		if fail {
			return errors.New("failed")
		}
		return nil
	}
	if run(false, false); len(got) != 0 {
		t.Errorf("success ran %v", got)
	}
	if run(true, false); !slices.Equal(got, []int{2, 1}) {
		t.Errorf("failure ran %v, want [2 1]", got)
	}
	got = nil
	if run(true, true); len(got) != 0 {
		t.Errorf("failure after Release ran %v", got)
	}
}
