package session

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/execbox/execbox"
	"github.com/execbox/execbox/internal/agent/proc"
)

//go:embed driver.py
var pythonDriver string

// maxFrame bounds a response frame from the driver: a cell's value and
// exception are cut to the output limit (at most a few times that in
// JSON), so anything larger is a broken driver.
const maxFrame = 256 << 20

// pythonOptions sets the process options of a Python session: the
// interpreter with its options, then -u, the driver and the status FIFO.
func (s *Session) pythonOptions(o *proc.Options) error {
	if err := s.writePrivate("driver.py", pythonDriver); err != nil {
		return err
	}
	args := append([]string{}, o.Args...)
	args = append(args, "-u", filepath.Join(s.dir, "driver.py"), filepath.Join(s.dir, "status"))
	o.Args = args
	return nil
}

// pyRequest is a request frame.
type pyRequest struct {
	ID    uint64 `json:"id"`
	Code  string `json:"code"`
	Out   string `json:"out"`
	Err   string `json:"err"`
	In    string `json:"in,omitempty"`
	Limit int64  `json:"limit"`
	Nonce string `json:"nonce"`
}

// pyResponse is a response frame.
type pyResponse struct {
	T         string             `json:"t"`
	ID        uint64             `json:"id"`
	Nonce     string             `json:"nonce"`
	Value     *string            `json:"value"`
	Exception *execbox.Exception `json:"exception"`
}

// pyResult is what a cell returned.
type pyResult struct {
	value     string
	exception *execbox.Exception
}

func (r *pyResult) fill(res *execbox.SessionResult) {
	res.Value = r.value
	res.Exception = r.exception
	if r.exception != nil {
		res.ExitCode = 1
	}
}

// pythonSend sends cell n to the driver.
func (s *Session) pythonSend(n uint64, nonce, code string, st *streams, limit int64) error {
	body, err := json.Marshal(pyRequest{ID: n, Code: code, Out: st.outPath, Err: st.errPath, In: st.inPath, Limit: limit, Nonce: nonce})
	if err != nil {
		return err
	}
	frame := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(frame, uint32(len(body)))
	copy(frame[4:], body)
	// The driver is idle and reading: the write completes. It must not
	// stop halfway (the stream would be out of step), hence no ctx.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = s.p.WriteStdin(ctx, frame)
	return err
}

// readFrames decodes the driver's response frames until the FIFO closes.
func (s *Session) readFrames() {
	r := bufio.NewReader(s.status)
	var head [4]byte
	for {
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return
		}
		size := binary.BigEndian.Uint32(head[:])
		if size > maxFrame {
			go s.kill(fmt.Sprintf("the driver sent a frame of %d bytes", size))
			return
		}
		body := make([]byte, size)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		var f pyResponse
		if err := json.Unmarshal(body, &f); err != nil {
			go s.kill(fmt.Sprintf("the driver sent a bad frame: %v", err))
			return
		}
		m := msg{id: f.ID, nonce: f.Nonce}
		switch f.T {
		case "ready":
			m.kind = 'R'
		case "started":
			m.kind = 'S'
		case "interrupted":
			m.kind = 'X'
		case "result":
			m.kind = 'E'
			m.py = &pyResult{exception: f.Exception}
			if f.Value != nil {
				m.py.value = *f.Value
			}
		default:
			s.log.Warn("unknown frame ignored", "t", f.T)
			continue
		}
		if !s.deliver(m) {
			return
		}
	}
}
