package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/client"
	"github.com/execbox/execbox/internal/testutil"
)

// Hostile clients of execbox serve's memory (docs/server.md, "Memory"):
// tenants that send execs printing 32 MiB each and never read the
// answers, or read them at a crawl. Before the result budget, the server
// held every finished result until it was read: 128 MiB per exec at the
// default maximum, and it was OOM-killed at the fifteenth.
const (
	memBudget   = 256 << 20 // server.max_result_memory
	memTenants  = 4
	memHostile  = 6 // never-reading execs per tenant
	memSlow     = 2 // slow readers per tenant
	memStream   = 16 << 20
	memReadRate = 4 << 20 // server.min_read_rate
)

// TestServeMemoryHostileClients: execbox serve stays under its stated
// bound (max_result_memory plus its base; docs/server.md) whatever its
// callers do: never reading, reading slowly, many tenants at once. Those
// the budget cannot take are refused with resource_exhausted saying why,
// slow readers are ended, and the server serves normally afterwards.
func TestServeMemoryHostileClients(t *testing.T) {
	keys, tokens := memKeys(t)
	cmd, url := startServeMeasured(t, nil, "--listen", "127.0.0.1:0", "--runtime", "local", "--keys-file", keys,
		"--max-result-memory", fmt.Sprint(memBudget), "--min-read-rate", fmt.Sprint(memReadRate))
	pid := cmd.Process.Pid
	ctx := t.Context()
	sbs := make([]execbox.Sandbox, memTenants)
	for i := range sbs {
		c, err := client.New(url, client.WithToken(tokens[i]), client.WithRetry(client.Retry{Attempts: 1}))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if sbs[i], err = c.Create(ctx, execbox.Spec{}, client.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer sbs[i].Close()
		if _, err := sbs[i].Exec(ctx, execbox.ExecRequest{Shell: "echo warm"}); err != nil {
			t.Fatal(err)
		}
	}
	base := testutil.PeakRSS(t, pid)
	testutil.ResetPeakRSS(t, pid)

	host := strings.TrimPrefix(url, "http://")
	body := fmt.Sprintf(`{"shell":"head -c %d /dev/zero | tr '\\0' a; head -c %d /dev/zero | tr '\\0' b >&2","output_limit":%d}`, memStream, memStream, memStream)
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[string]int{}
	var slowEnded, slowWhole int
	for i := range memTenants {
		path := "/v1/sandboxes/" + sbs[i].ID() + "/exec"
		for range memSlow {
			conn := rawExec(t, host, path, tokens[i], body)
			defer conn.Close()
			wg.Add(1)
			go func() {
				defer wg.Done()
				status, ended := slowRead(conn, 64<<10, 100*time.Millisecond)
				mu.Lock()
				defer mu.Unlock()
				statuses[status]++
				if status == "200" {
					if ended {
						slowEnded++
					} else {
						slowWhole++
					}
				}
			}()
			time.Sleep(50 * time.Millisecond) // in this order: slow readers first
		}
		for range memHostile {
			conn := rawExec(t, host, path, tokens[i], body)
			defer conn.Close() // never read
			time.Sleep(50 * time.Millisecond)
		}
	}
	// Every exec the budget took has ended by now and its result waits
	// for its reader; a caller asking now is refused, saying why.
	time.Sleep(8 * time.Second)
	_, err := sbs[0].Exec(ctx, execbox.ExecRequest{Shell: "echo hi"})
	if !errors.Is(err, execbox.ErrResourceExhausted) || !strings.Contains(err.Error(), "not yet read") {
		t.Errorf("an exec while the budget is held: %v, want ErrResourceExhausted saying results are not yet read", err)
	}
	wg.Wait()
	peak := testutil.PeakRSS(t, pid)
	t.Logf("execbox serve: %d MiB RSS before, a peak of %d MiB with %d hostile and %d slow callers over %d tenants (budget %d MiB); slow readers: %v, %d ended, %d read whole",
		base>>20, peak>>20, memTenants*memHostile, memTenants*memSlow, memTenants, memBudget>>20, statuses, slowEnded, slowWhole)
	// The stated bound (docs/server.md): the budget and half again for the
	// garbage collector's headroom, above the server's own base.
	if bound := base + memBudget*3/2; peak > bound {
		t.Errorf("execbox serve peaked at %d MiB RSS, over its bound of %d MiB (base %d MiB + 1.5 times the %d MiB budget)", peak>>20, bound>>20, base>>20, memBudget>>20)
	}
	if slowEnded == 0 {
		t.Errorf("no slow reader was ended (statuses %v, %d read whole)", statuses, slowWhole)
	}
	// Once the hostile callers are ended, the server serves as before.
	testutil.Eventually(t, 30*time.Second, func() bool {
		res, err := sbs[1].Exec(ctx, execbox.ExecRequest{Shell: "head -c 1048576 /dev/zero"})
		return err == nil && len(res.Stdout.Data) == 1<<20
	}, "an exec to succeed once the slow and never-reading callers are ended")
}

// memKeys writes a keys file of memTenants tenants and returns it and
// their keys.
func memKeys(t *testing.T) (string, []string) {
	var data strings.Builder
	tokens := make([]string, memTenants)
	for i := range tokens {
		tokens[i] = fmt.Sprintf("tenant-%d-key-0123456789abcdef", i)
		fmt.Fprintf(&data, "- {name: t%d, key: %s}\n", i, tokens[i])
	}
	keys := filepath.Join(t.TempDir(), "keys.yaml")
	if err := os.WriteFile(keys, []byte(data.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return keys, tokens
}

// rawExec sends an exec request on a connection of its own and returns
// the connection, the response unread.
func rawExec(t *testing.T, host, path, token, body string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		path, host, token, len(body), body)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// slowRead reads a response from conn at chunk bytes per tick and
// returns its status and whether its body ended before its length.
func slowRead(conn net.Conn, chunk int, tick time.Duration) (status string, ended bool) {
	br := bufio.NewReaderSize(conn, chunk)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return "error: " + err.Error(), false
	}
	defer resp.Body.Close()
	for {
		_, err := io.CopyN(io.Discard, resp.Body, int64(chunk))
		if errors.Is(err, io.EOF) {
			return resp.Status[:3], false
		}
		if err != nil {
			return resp.Status[:3], true
		}
		time.Sleep(tick)
	}
}
