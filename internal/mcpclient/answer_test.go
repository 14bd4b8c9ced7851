package mcpclient

import (
	"io"
	"strings"
	"testing"
)

// An answer over HTTP is read to MaxAnswer and fails past it; one within
// it reads whole (a 256 MiB answer held 2.8 GB of the worker's heap).
func TestAnswersAreBounded(t *testing.T) {
	for _, c := range []struct {
		size int64
		fail bool
	}{{MaxAnswer, false}, {MaxAnswer + 1, true}, {4 * MaxAnswer, true}} {
		body := &bounded{ReadCloser: io.NopCloser(io.LimitReader(zeros{}, c.size)), left: MaxAnswer}
		n, err := io.Copy(io.Discard, body)
		if c.fail != (err != nil) || n > MaxAnswer+1 || (err != nil && !strings.Contains(err.Error(), "passed 32 MiB")) {
			t.Errorf("an answer of %d bytes: read %d, %v", c.size, n, err)
		}
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }
