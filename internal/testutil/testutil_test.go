package testutil

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestDepProbesOnce(t *testing.T) {
	var n atomic.Int32
	d := NewDep("fake", func() error { n.Add(1); return errors.New("absent") })
	for range 3 {
		if d.Available() {
			t.Fatal("Available() = true, want false")
		}
	}
	if got := n.Load(); got != 1 {
		t.Errorf("probe ran %d times, want 1", got)
	}
}

func TestCommandShared(t *testing.T) {
	if a, b := Command("sh"), Command("sh"); a != b {
		t.Error("Command(\"sh\") returned two different deps")
	}
	if got, want := Command("sh").Name(), "command:sh"; got != want {
		t.Errorf("Name() = %q, want %q", got, want)
	}
	Require(t, Command("sh"))
}

func TestRequireSkips(t *testing.T) {
	t.Setenv(RequireEnv, "")
	missing := NewDep("never-present", func() error { return errors.New("absent by design") })
	ok := t.Run("inner", func(t *testing.T) {
		Require(t, missing)
		t.Error("Require did not stop the test")
	})
	if !ok {
		t.Error("subtest failed, want skipped")
	}
}

func TestRequired(t *testing.T) {
	for _, tc := range []struct {
		env, name string
		want      bool
	}{
		{"", "docker", false},
		{"all", "docker", true},
		{"root, docker", "docker", true},
		{"root,command:python3", "command:python3", true},
		{"root", "docker", false},
		{"all,-root", "root", false},
		{"all, -root", "docker", true},
		{"-root,root", "root", false},
	} {
		t.Setenv(RequireEnv, tc.env)
		if got := required(tc.name); got != tc.want {
			t.Errorf("required(%q) with %s=%q = %v, want %v", tc.name, RequireEnv, tc.env, got, tc.want)
		}
	}
}

func TestUnescapeMount(t *testing.T) {
	if got, want := unescapeMount(`/a\040b\134c\04`), `/a b\c\04`; got != want {
		t.Errorf("unescapeMount = %q, want %q", got, want)
	}
}

func TestCgroupControllers(t *testing.T) {
	c, err := CgroupControllers()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("controllers: %v", c)
}

func TestProbesDoNotPanic(t *testing.T) {
	for _, d := range []Dep{Root, Docker, UserNamespaces, CgroupV1orV2, Command("git")} {
		t.Logf("%s: %v", d.Name(), d.Check())
	}
}

func TestEventually(t *testing.T) {
	start := time.Now()
	n := 0
	Eventually(t, time.Second, func() bool { n++; return n == 3 }, "third call")
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("Eventually took %v for a condition met on the third poll", d)
	}
	if Poll(t.Context(), 20*time.Millisecond, func() bool { return false }) {
		t.Error("Poll = true for a condition never met")
	}
	Logger(t).Info("logged", "key", "value")
}
