package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/execbox/execbox"
)

// TestMetricsListenValidated: server.metrics_listen takes HOST:PORT or
// unix:PATH; anything else is an error naming the key and the line.
func TestMetricsListenValidated(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:9090", ":9090", "[::1]:0", "unix:/run/execbox-metrics.sock"} {
		file := writeFile(t, "c.yaml", "server:\n  metrics_listen: \""+ok+"\"\n")
		c, err := Load(LoadOptions{Getenv: env(map[string]string{"EXECBOX_CONFIG": file})})
		if err != nil || c.Server.MetricsListen != ok {
			t.Errorf("metrics_listen %q: %v, %q", ok, err, c.Server.MetricsListen)
		}
	}
	for _, bad := range []string{"nowhere", "unix:", "127.0.0.1:", "http://x:1"} {
		file := writeFile(t, "c.yaml", "server:\n  metrics_listen: \""+bad+"\"\n")
		_, err := Load(LoadOptions{Getenv: env(map[string]string{"EXECBOX_CONFIG": file})})
		if !errors.Is(err, execbox.ErrInvalidArgument) || !strings.Contains(err.Error(), "c.yaml:2: server.metrics_listen") {
			t.Errorf("metrics_listen %q: %v, want an error naming c.yaml:2: server.metrics_listen", bad, err)
		}
	}
}
