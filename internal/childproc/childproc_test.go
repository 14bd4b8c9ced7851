package childproc

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// testKind's children (this test binary under another name) answer
// "echo X" with X, "alloc N" by allocating N bytes, "pid" with their pid,
// "span" with when it started and ended (20 ms apart), and "spin" never.
var testKind = New("capflow-childproc-test", 1<<20)

func init() {
	testKind.Enter(func(req []byte) []byte {
		cmd, arg, _ := bytes.Cut(req, []byte(" "))
		switch string(cmd) {
		case "alloc":
			n, _ := strconv.Atoi(string(arg))
			b := make([]byte, n)
			for i := range b {
				b[i] = 1
			}
			return []byte(strconv.Itoa(len(b)))
		case "pid":
			return []byte(strconv.Itoa(os.Getpid()))
		case "span": // when it started and ended, 20 ms apart
			start := time.Now().UnixNano()
			time.Sleep(20 * time.Millisecond)
			return []byte(strconv.FormatInt(start, 10) + " " + strconv.FormatInt(time.Now().UnixNano(), 10))
		case "spin":
			for spin(); ; spin() {
			}
		}
		return arg
	})
}

func TestAsk(t *testing.T) {
	for req, want := range map[string]error{
		"echo hello":         nil,
		"alloc 1000":         nil,
		"alloc 2000000000":   ErrMemory,
		"echo " + big(2<<20): ErrTooLarge,
	} {
		got, err := testKind.Ask(context.Background(), 64<<20, []byte(req), time.Minute)
		if !errors.Is(err, want) {
			t.Errorf("%.20s: %v, want %v", req, err, want)
		}
		if want == nil && req == "echo hello" && string(got) != "hello" {
			t.Errorf("echo: %q", got)
		}
	}
}

// spin is work the compiler keeps: "spin" never answers.
func spin() { runtime.Gosched() }

func big(n int) string { return string(bytes.Repeat([]byte("x"), n)) }

// A child still busy when its caller gives up is killed; the pool still
// answers.
func TestCancelKillsTheChild(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := testKind.Ask(ctx, 0, []byte("spin"), time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
	if got, err := testKind.Ask(context.Background(), 0, []byte("echo again"), time.Minute); err != nil || string(got) != "again" {
		t.Fatalf("%q %v", got, err)
	}
}

// An idle child that died while it waited costs no request: it goes to a
// fresh one.
func TestDeadIdleChildIsReplaced(t *testing.T) {
	if err := testKind.Warm(48 << 20); err != nil {
		t.Fatal(err)
	}
	testKind.mu.Lock()
	idle := testKind.idle[48<<20]
	testKind.mu.Unlock()
	if len(idle) == 0 {
		t.Fatal("no idle child kept")
	}
	for _, c := range idle {
		_ = c.cmd.Process.Kill()
		_, _ = c.cmd.Process.Wait()
	}
	if got, err := testKind.Ask(context.Background(), 48<<20, []byte("echo 2"), time.Minute); err != nil || string(got) != "2" {
		t.Fatalf("%q %v", got, err)
	}
}

// However many callers ask at once, at most the slots' number of children
// work at once: the others wait their turn, and all are answered.
func TestChildrenAtOnceAreBounded(t *testing.T) {
	k := New("capflow-childproc-test", 1<<20)
	k.slots = make(chan struct{}, 2)
	spans := make(chan string, 20)
	for range 20 {
		go func() {
			got, err := k.Ask(context.Background(), 0, []byte("span"), time.Minute)
			if err != nil {
				got = []byte(err.Error())
			}
			spans <- string(got)
		}()
	}
	type edge struct {
		at    int64
		delta int
	}
	var edges []edge
	for range 20 {
		var start, end int64
		if _, err := fmt.Sscan(<-spans, &start, &end); err != nil {
			t.Fatal(err)
		}
		edges = append(edges, edge{start, 1}, edge{end, -1})
	}
	slices.SortFunc(edges, func(a, b edge) int { return cmp.Or(cmp.Compare(a.at, b.at), a.delta-b.delta) })
	most, now := 0, 0
	for _, e := range edges {
		now += e.delta
		most = max(most, now)
	}
	if most > 2 {
		t.Errorf("%d children worked at once, for 2 slots", most)
	}
}

// A limit counts from when a child takes the request, not while it waits
// for a slot.
func TestLimitCountsFromTheChild(t *testing.T) {
	k := New("capflow-childproc-test", 1<<20)
	k.slots = make(chan struct{}, 1)
	k.slots <- struct{}{}
	go func() {
		time.Sleep(300 * time.Millisecond)
		<-k.slots
	}()
	if got, err := k.Ask(context.Background(), 0, []byte("span"), 200*time.Millisecond); err != nil {
		t.Fatalf("%q %v: the wait for a slot was counted", got, err)
	}
}

// A child outlives the thread that started it: children are started on
// one thread kept for the life of the process, where threads that ended
// while children worked (a locked goroutine's return, as the sandbox's own
// threads do) had killed the children they had forked (Pdeathsig: 11 of 12
// requests failed; found attacking issue 57).
func TestChildrenOutliveTheThreadsThatStartedThem(t *testing.T) {
	k := New("capflow-childproc-test", 1<<20)
	stop := make(chan struct{})
	defer close(stop)
	go func() { // threads that end, all along
		for {
			select {
			case <-stop:
				return
			default:
			}
			var w sync.WaitGroup
			for range 4 {
				w.Add(1)
				go func() { defer w.Done(); runtime.LockOSThread(); time.Sleep(time.Millisecond) }()
			}
			w.Wait()
		}
	}()
	errs := make(chan error, 12)
	for range 12 {
		go func() {
			_, err := k.Ask(context.Background(), 40<<20, []byte("span"), time.Minute)
			errs <- err
		}()
		time.Sleep(10 * time.Millisecond)
	}
	for range 12 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// A request that waits for a slot until its context ends says so.
func TestBusyEvaluatorsSaySo(t *testing.T) {
	k := New("capflow-childproc-test", 1<<20)
	k.slots = make(chan struct{}, 1)
	k.slots <- struct{}{}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := k.Ask(ctx, 0, []byte("echo x"), time.Minute); !errors.Is(err, ErrBusy) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v", err)
	}
	if err := k.Warm(0); err != nil {
		t.Fatal(err)
	}
	if k.Ready(0) {
		t.Error("ready, an idle child but no slot free")
	}
}

// Children are this process's own binary even once its path holds another
// (an upgrade renamed a new binary over it) or none: they had run the new
// one, which speaks another request format (found attacking issue 57).
// Not parallel: it moves the test binary aside and back.
func TestChildrenRunTheirParentsBinary(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	keep := self + ".keep"
	if err := os.Link(self, keep); err != nil {
		t.Fatal(err)
	}
	defer os.Rename(keep, self)
	k := New("capflow-childproc-test", 1<<20)
	if err := os.Remove(self); err != nil {
		t.Fatal(err)
	}
	if got, err := k.Ask(context.Background(), 46<<20, []byte("echo removed"), time.Minute); err != nil || string(got) != "removed" {
		t.Fatalf("the binary removed: %q %v", got, err)
	}
	if err := os.WriteFile(self, []byte("#!/bin/sh\nexit 7\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := k.Ask(context.Background(), 47<<20, []byte("echo replaced"), time.Minute); err != nil || string(got) != "replaced" {
		t.Fatalf("another file at its path: %q %v", got, err)
	}
}
