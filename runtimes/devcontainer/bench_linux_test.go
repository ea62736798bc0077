package devcontainer_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/runtimes/devcontainer"
	"github.com/execbox/execbox/runtimes/local"
)

// BenchmarkExecTrue is Exec of `true` in a devcontainer (the agent
// attached to it, over its socket), interleaved with the local runtime's
// in the same run: devcontainer_extra_ms is the boundary's cost.
func BenchmarkExecTrue(b *testing.B) {
	rt := newRuntime(b, devcontainer.Options{})
	dir := project(b, fmt.Sprintf(`{"image": %q}`, shared.tag), map[string]string{})
	sb, err := rt.Create(b.Context(), execbox.Spec{Workspace: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close()
	lsb, err := local.New(local.Options{}).Create(b.Context(), execbox.Spec{})
	if err != nil {
		b.Fatal(err)
	}
	defer lsb.Close()
	execTrue := func(s execbox.Sandbox) time.Duration {
		t0 := time.Now()
		if res, err := s.Exec(b.Context(), execbox.ExecRequest{Command: []string{"true"}}); err != nil || !res.Success() {
			b.Fatal(err, res.String())
		}
		return time.Since(t0)
	}
	for range 5 {
		execTrue(sb)
		execTrue(lsb)
	}
	var dev, loc []time.Duration
	for b.Loop() {
		dev = append(dev, execTrue(sb))
		loc = append(loc, execTrue(lsb))
	}
	b.ReportMetric(ms(median(dev)), "devcontainer_median_ms")
	b.ReportMetric(ms(median(loc)), "local_median_ms")
	b.ReportMetric(ms(median(dev)-median(loc)), "devcontainer_extra_ms")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
