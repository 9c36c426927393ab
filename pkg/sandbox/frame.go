package sandbox

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
)

// Frames between parent and child: a 4-byte big-endian length, then that
// many bytes of JSON. Lengths let either side refuse an oversized message
// before reading it.

// request is what the parent sends for one script.
type request struct {
	Code        string          `json:"code"`
	Scope       json.RawMessage `json:"scope,omitempty"`
	TimeoutMs   int64           `json:"timeoutMs"`
	MemoryBytes int64           `json:"memoryBytes"`
	OutputBytes int             `json:"outputBytes"`
}

// response is what the child answers. Limit names the limit a script hit
// ("time", "memory", "crash"), after which the parent retires the child.
type response struct {
	Output json.RawMessage `json:"output,omitempty"`
	Logs   []string        `json:"logs,omitempty"`
	Error  string          `json:"error,omitempty"`
	Limit  string          `json:"limit,omitempty"`
	// CPUMs is the child's CPU time so far, so the parent retires it well
	// before its lifetime CPU limit.
	CPUMs int64 `json:"cpuMs"`
}

// hello is the child's first frame: it proves the binary serves the
// sandbox (and is not, say, a second flowd started by mistake).
type hello struct {
	Sandbox string `json:"sandbox"`
}

const protocol = "flow-sandbox/1"

func writeFrame(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	buf := make([]byte, 4+len(b))
	binary.BigEndian.PutUint32(buf, uint32(len(b)))
	copy(buf[4:], b)
	_, err = w.Write(buf)
	return err
}

func readFrame(r io.Reader, max int, v any) error {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return err
	}
	size := binary.BigEndian.Uint32(n[:])
	if int64(size) > int64(max) {
		return fmt.Errorf("frame of %d bytes is over the %d-byte limit", size, max)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
