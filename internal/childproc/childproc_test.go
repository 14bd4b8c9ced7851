package childproc

import (
	"bytes"
	"context"
	"errors"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// testKind's children (this test binary under another name) answer
// "echo X" with X, "alloc N" by allocating N bytes, "pid" with their pid
// after 20 ms, and "spin" never.
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
		case "pid": // after a while, so that callers overlap
			time.Sleep(20 * time.Millisecond)
			return []byte(strconv.Itoa(os.Getpid()))
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
		got, err := testKind.Ask(context.Background(), 64<<20, []byte(req))
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
	if _, err := testKind.Ask(ctx, 0, []byte("spin")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
	if got, err := testKind.Ask(context.Background(), 0, []byte("echo again")); err != nil || string(got) != "again" {
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
	if got, err := testKind.Ask(context.Background(), 48<<20, []byte("echo 2")); err != nil || string(got) != "2" {
		t.Fatalf("%q %v", got, err)
	}
}

// However many callers ask at once, at most the kind's slots of children
// work: the others wait their turn, and all are answered.
func TestChildrenAtOnceAreBounded(t *testing.T) {
	k := New("capflow-childproc-test", 1<<20)
	k.slots = make(chan struct{}, 2)
	pids := make(chan string, 20)
	for range 20 {
		go func() {
			got, err := k.Ask(context.Background(), 0, []byte("pid"))
			if err != nil {
				got = []byte(err.Error())
			}
			pids <- string(got)
		}()
	}
	seen := map[string]bool{}
	for range 20 {
		pid := <-pids
		if _, err := strconv.Atoi(pid); err != nil {
			t.Fatal(pid)
		}
		seen[pid] = true
	}
	if len(seen) > 2 {
		t.Errorf("%d children answered, for 2 slots", len(seen))
	}
}
