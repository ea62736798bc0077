package cli

import (
	"bytes"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/api"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/testutil"
)

// getMetrics GETs url with the bearer token tok (none if empty) and
// returns the status and, for a 200, the parsed metrics.
func getMetrics(t *testing.T, url, tok string) (int, map[string]*dto.MetricFamily) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, mfs
}

// counter returns the value of the counter name with exactly labels, or -1.
func counter(mfs map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	for _, m := range mfs[name].GetMetric() {
		got := map[string]string{}
		for _, lp := range m.GetLabel() {
			got[lp.GetName()] = lp.GetValue()
		}
		match := len(got) == len(labels)
		for k, v := range labels {
			match = match && got[k] == v
		}
		if match {
			return m.GetCounter().GetValue()
		}
	}
	return -1
}

// TestServeMetrics: execbox serve serves /metrics behind the token on its
// address and without one on --metrics-listen, counts what clients do,
// and logs each request at --log-level info with its request ID.
func TestServeMetrics(t *testing.T) {
	const tokenVar = "EXECBOX_TEST_METRICS_TOKEN"
	t.Setenv(tokenVar, "tok")
	url, stderr, stop := startServeOut(t, "--listen", "127.0.0.1:0", "--token-env", tokenVar,
		"--metrics-listen", "127.0.0.1:0", "--log-level", "info")
	re := regexp.MustCompile(`metrics, without a token, at (http://\S+)`)
	var metricsURL string
	testutil.Eventually(t, 10*time.Second, func() bool {
		m := re.FindStringSubmatch(stderr())
		if m != nil {
			metricsURL = m[1]
		}
		return m != nil
	}, "execbox serve to say where its metrics are")

	ctx := t.Context()
	c, err := client.New(url, client.WithToken("tok"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sb, err := c.Create(ctx, execbox.Spec{}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const reqID = "cli-metrics-0b7d"
	if _, err := sb.Exec(api.WithRequestID(ctx, reqID), execbox.ExecRequest{Command: []string{"true"}}); err != nil {
		t.Fatal(err)
	}

	if code, _ := getMetrics(t, url+"/metrics", ""); code != http.StatusUnauthorized {
		t.Errorf("/metrics on the API address without the token: %d, want 401", code)
	}
	execs := map[string]string{"route": "POST /v1/sandboxes/{sandbox}/exec", "code": "200"}
	for _, tc := range []struct{ url, tok string }{{url + "/metrics", "tok"}, {metricsURL, ""}} {
		code, mfs := getMetrics(t, tc.url, tc.tok)
		if code != http.StatusOK {
			t.Errorf("GET %s: %d", tc.url, code)
			continue
		}
		if got := counter(mfs, "execbox_http_requests_total", execs); got != 1 {
			t.Errorf("GET %s: execs counted %v, want 1", tc.url, got)
		}
		if mfs["execbox_exec_duration_seconds"] == nil || mfs["execbox_sandboxes_live"] == nil || mfs["process_cpu_seconds_total"] == nil {
			t.Errorf("GET %s: metrics missing: %d families", tc.url, len(mfs))
		}
	}
	if code, _ := getMetrics(t, strings.TrimSuffix(metricsURL, "/metrics")+"/v1/sandboxes", ""); code != http.StatusNotFound {
		t.Errorf("the metrics address serves the API: %d", code)
	}

	// The access log: one line of the exec, at info, with its request ID.
	var line string
	for _, l := range strings.Split(stderr(), "\n") {
		if strings.Contains(l, "request_id="+reqID) {
			line = l
		}
	}
	for _, want := range []string{"level=INFO", "msg=request", `route="POST /v1/sandboxes/{sandbox}/exec"`, "status=200", "sandbox=" + sb.ID()} {
		if !strings.Contains(line, want) {
			t.Errorf("access log line %q lacks %s", line, want)
		}
	}
	if code := stop(); code != 0 {
		t.Errorf("serve exited %d", code)
	}
	if _, err := http.Get(metricsURL); err == nil {
		t.Errorf("the metrics address still answers after serve stopped")
	}
}

// TestServeMetricsListenInvalid: a bad server.metrics_listen is a usage
// error naming the flag, before anything is served.
func TestServeMetricsListenInvalid(t *testing.T) {
	var stderr bytes.Buffer
	code := Main(t.Context(), []string{"serve", "--config=", "--listen", "127.0.0.1:0", "--metrics-listen", "nowhere"}, nil, &bytes.Buffer{}, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), "metrics-listen") || !strings.Contains(stderr.String(), "HOST:PORT") {
		t.Errorf("--metrics-listen nowhere: exit %d, %q", code, stderr.String())
	}
}
