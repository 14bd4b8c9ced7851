package registry

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestMemoSharesLoadsBegunAfterTheCaller checks that callers asking while
// a load is under way share the next one, never the one under way: it
// may have looked before an edit they must see.
func TestMemoSharesLoadsBegunAfterTheCaller(t *testing.T) {
	var m Memo
	var mu sync.Mutex
	loads := 0
	first, release := make(chan struct{}), make(chan struct{})
	load := func() (*Registry, error) {
		mu.Lock()
		loads++
		n := loads
		mu.Unlock()
		if n == 1 {
			close(first)
			<-release // the first look is under way while the others ask
		}
		return &Registry{Warnings: []string{string(rune('0' + n))}}, nil
	}
	got := make(chan string, 11)
	go func() { r, _ := m.shared(load); got <- "first:" + r.Warnings[0] }()
	<-first
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { r, _ := m.shared(load); got <- r.Warnings[0] })
	}
	waitFor(t, &m, 10)
	close(release)
	wg.Wait()
	if want := "first:1"; <-got != want {
		t.Fatalf("the first caller got another load than its own")
	}
	for range 10 {
		if g := <-got; g != "2" {
			t.Fatalf("a caller that asked during the first load got load %s, want 2 (the next one)", g)
		}
	}
	if loads != 2 {
		t.Fatalf("%d loads for 11 callers, want 2", loads)
	}
	if r, _ := m.shared(load); r.Warnings[0] != "3" {
		t.Fatalf("a caller after every load ended got load %s, want a new one (3)", r.Warnings[0])
	}
}

// waitFor waits until n callers wait on the memo's next look.
func waitFor(t *testing.T, m *Memo, n int) {
	t.Helper()
	for start := time.Now(); time.Since(start) < time.Minute; {
		m.looks.Lock()
		waiting := m.next != nil && m.next.callers >= n
		m.looks.Unlock()
		if waiting {
			return
		}
		runtime.Gosched()
	}
	t.Fatalf("%d callers did not join the look after the one under way", n)
}
