// Package syncbuf is a bytes.Buffer safe to write and read at once: a
// process's output that a test reads while the process runs.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is written and read under one lock.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
