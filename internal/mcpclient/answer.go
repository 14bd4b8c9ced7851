package mcpclient

import (
	"fmt"
	"io"
)

// MaxAnswer bounds what an MCP server over HTTP answers to one request in
// JSON (an answer as a stream of events is bounded an event at a time, by
// the SDK's DefaultMaxEventSize): the SDK reads a JSON answer whole, and a 256 MiB one held 2.8 GB of the
// worker's heap (found attacking issue 57). A server over stdio is held to
// the SDK's 16 MiB a message.
const MaxAnswer = 32 << 20

// bounded is a body that fails past its bound.
type bounded struct {
	io.ReadCloser
	left int64
}

func (b *bounded) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, fmt.Errorf("the MCP server's answer passed %d MiB", MaxAnswer>>20)
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1] // one byte past the bound tells there is more
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, fmt.Errorf("the MCP server's answer passed %d MiB", MaxAnswer>>20)
	}
	return n, err
}
