package sandbox

import (
	"io"
	"os"
	"sync"
	"time"
)

// streams are a zygote tree's standard streams: the descriptors handed to
// it, and the copies between pipes and the caller's readers and writers
// that exec.Cmd would otherwise make.
type streams struct {
	child  []*os.File // handed to the tree; ours closed once it has them
	parent []*os.File // our ends of the pipes
	copies sync.WaitGroup
	delay  time.Duration
	// input copies stdin into its pipe once the tree has started (feed).
	input func()
}

// stdio makes the tree's stdin, stdout and stderr from std.
func (t *Tree) stdio(std Stdio) ([]*os.File, error) {
	t.streams = &streams{delay: std.WaitDelay}
	in, err := t.streams.reader(std.In)
	if err != nil {
		return nil, err
	}
	files := []*os.File{in}
	for i, w := range []io.Writer{std.Out, std.Err} {
		if i == 1 && w != nil && interfaceEqual(w, std.Out) {
			files = append(files, files[1]) // one pipe for both, as exec.Cmd does
			continue
		}
		f, err := t.streams.writer(w)
		if err != nil {
			t.closeChildEnds()
			t.closeParentEnds()
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

func (s *streams) reader(r io.Reader) (*os.File, error) {
	if f, ok := r.(*os.File); ok {
		return f, nil
	}
	if r == nil {
		f, err := os.Open(os.DevNull)
		s.child = append(s.child, f)
		return f, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	s.child, s.parent = append(s.child, pr), append(s.parent, pw)
	s.input = func() {
		_, _ = io.Copy(pw, r)
		pw.Close()
	}
	return pr, nil
}

// feed starts copying stdin, once the tree runs.
func (s *streams) feed() {
	if s.input != nil {
		go s.input()
	}
}

func (s *streams) writer(w io.Writer) (*os.File, error) {
	if f, ok := w.(*os.File); ok {
		return f, nil
	}
	if w == nil {
		f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		s.child = append(s.child, f)
		return f, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	s.child, s.parent = append(s.child, pw), append(s.parent, pr)
	s.copies.Add(1)
	go func() {
		defer s.copies.Done()
		_, _ = io.Copy(w, pr)
	}()
	return pw, nil
}

// closeChildEnds closes our copies of what the tree was handed.
func (t *Tree) closeChildEnds() {
	for _, f := range t.streams.child {
		if f != nil {
			f.Close()
		}
	}
	t.streams.child = nil
}

// closeParentEnds closes our ends of the pipes (the copies end).
func (t *Tree) closeParentEnds() {
	for _, f := range t.streams.parent {
		f.Close()
	}
}

// waitStreams waits for the output copies, up to the delay once the tree
// has ended (a child it left may hold them open), then closes the pipes.
func (t *Tree) waitStreams() {
	done := make(chan struct{})
	go func() {
		t.streams.copies.Wait()
		close(done)
	}()
	if t.streams.delay > 0 {
		select {
		case <-done:
		case <-time.After(t.streams.delay):
		}
	} else {
		<-done
	}
	t.closeParentEnds()
	<-done
}

// interfaceEqual reports whether a and b are the same writer (false for
// writers that cannot be compared), as exec.Cmd decides to share a pipe.
func interfaceEqual(a, b any) bool {
	defer func() { _ = recover() }()
	return a == b
}
