package sandbox

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capflow/capflow/internal/manifest"
)

// TestEachStepItsOwnNetwork: a zygote step's network namespace, made
// ahead for a root worker's steps or by the step's own clone, is new for
// every step: never the worker's, never another step's (a step running
// beside one listening on its loopback cannot reach it), with its
// loopback up.
func TestEachStepItsOwnNetwork(t *testing.T) {
	worker, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	s, step := support(t), t.TempDir()
	// A step that listens on its loopback, says where and in which
	// namespace, and runs until its stdin closes.
	const listen = `python3 -c '
import os, socket, sys
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen()
print(os.readlink("/proc/self/ns/net"), l.getsockname()[1], flush=True)
sys.stdin.read()'`
	for i := range 4 {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		tree := startWay(t, s, Request{Spec: Defaults, Argv: []string{"/bin/sh", "-c", listen}, Dir: step, Env: []string{"PATH=/usr/bin:/bin"}, Write: []string{step}},
			Stdio{In: inR, Out: outW, Err: outW})
		line, err := bufio.NewReader(outR).ReadString('\n')
		first, port, _ := strings.Cut(strings.TrimSpace(line), " ")
		if err != nil || !strings.HasPrefix(first, "net:[") || first == worker {
			t.Fatalf("try %d: the listening step said %q (%v); the worker's namespace is %s", i, line, err, worker)
		}
		o := run(t, Defaults, step, `readlink /proc/self/ns/net; python3 -c '
import socket, sys
c = socket.socket(); c.settimeout(2)
print("other", "open" if c.connect_ex(("127.0.0.1", int(sys.argv[1]))) == 0 else "refused")
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(); d = socket.socket()
print("own", "open" if d.connect_ex(l.getsockname()) == 0 else "refused")' `+port)
		inW.Close()
		exit, _ := tree.Wait()
		tree.Finish(exit, "")
		outW.Close()
		if want := "other refused\nown open"; o.exit != 0 || !strings.HasSuffix(strings.TrimSpace(o.out), want) {
			t.Fatalf("try %d: a step beside one listening on port %s said %q, want it to end %q", i, port, o.out, want)
		}
		if second, _, _ := strings.Cut(o.out, "\n"); second == first || second == worker {
			t.Fatalf("try %d: two steps at once shared the network namespace %s (the worker's is %s)", i, first, worker)
		}
	}
	if os.Geteuid() == 0 && zygoteBuilt && way == WayZygote && s.nets.ready == nil {
		t.Fatal("a root worker's zygote steps made their own network namespaces: the pool never started")
	}
}

// TestZygoteRefusesABadNetns: a request's --netns names one of the
// descriptors sent, past stdio, as a number, and the step's init enters
// only a network namespace that is not the worker's own: anything else
// ends the step before it runs (an attack on the pool, ede584d).
func TestZygoteRefusesABadNetns(t *testing.T) {
	s := support(t)
	if os.Geteuid() != 0 || !zygoteBuilt {
		t.Skip("the pool and --netns are a root worker's zygote's")
	}
	z := zygoteForTest(t, s)
	open := func(p string) *os.File {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	null, dir := open(os.DevNull), open(t.TempDir())
	host, uts := open("/proc/thread-self/ns/net"), open("/proc/thread-self/ns/uts")
	worker, _ := os.Readlink("/proc/thread-self/ns/net")
	pidfd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		t.Fatal(err)
	}
	pf := os.NewFile(uintptr(pidfd), "pidfd")
	defer pf.Close()
	for _, tc := range []struct {
		name  string
		extra []*os.File
		words []string
	}{
		{"stdio", []*os.File{dir}, []string{"--netns", "1"}},
		{"negative", []*os.File{dir}, []string{"--netns", "-1"}},
		{"not a number", []*os.File{dir}, []string{"--netns", "junk"}},
		{"a number then junk", []*os.File{dir}, []string{"--netns", "3junk"}},
		{"past the descriptors sent", []*os.File{dir}, []string{"--netns", "4"}},
		{"wrapping to 3", []*os.File{dir}, []string{"--netns", "4294967299"}},
		{"a folder", []*os.File{dir}, []string{"--netns", "3"}},
		{"another kind of namespace", []*os.File{uts}, []string{"--netns", "3"}},
		{"the worker's own network", []*os.File{host}, []string{"--netns", "3"}},
		{"a pidfd of the worker", []*os.File{pf}, []string{"--netns", "3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, w, _ := os.Pipe()
			words := strings.Join(append(tc.words, "--", "/bin/sh", "-c", "readlink /proc/self/ns/net"), "\x00") + "\x00"
			pid, mounts, err := z.spawn([]byte(words), append([]*os.File{null, w, w}, tc.extra...))
			mounts.Close() // nil for a refusal: a no-op
			w.Close()
			out, _ := io.ReadAll(r)
			r.Close()
			if pid > 0 {
				p, _ := os.FindProcess(pid)
				_, _ = p.Wait()
			}
			if err == nil || len(out) > 0 {
				t.Fatalf("the step ran: error %v, it said %q (the worker's namespace is %s)", err, out, worker)
			}
		})
	}
}

// TestNetPoolNeverKeepsTheMainThread: a pool begun on the process's main
// thread hands over to another (ownThread), so /proc/PID/ns/net, which
// follows the main thread, never names a namespace made for a step.
func TestNetPoolNeverKeepsTheMainThread(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the pool is a root worker's")
	}
	host, _ := os.Readlink("/proc/self/ns/net")
	p := &netPool{ready: make(chan *os.File, netPoolSize-1)}
	p.once.Do(func() {})
	defer p.off()
	onMain <- func() { ownThread(p.fill) }
	var stop atomic.Bool
	var moved atomic.Int64
	polled := make(chan struct{})
	go func() {
		for !stop.Load() {
			if l, _ := os.Readlink("/proc/self/ns/net"); l != host {
				moved.Add(1)
			}
		}
		close(polled)
	}()
	for range 300 {
		if f := p.take(); f != nil {
			f.Close()
		} else {
			time.Sleep(200 * time.Microsecond)
		}
	}
	stop.Store(true)
	<-polled
	if moved.Load() > 0 {
		t.Fatalf("/proc/self/ns/net named another namespace than the worker's %d times", moved.Load())
	}
}

// TestNetnsLeavesRoomForFolders: a request of stdio and 61 write folders
// (64 descriptors, the zygote's most) stays the zygote's: the namespace
// made ahead is sent only where it fits.
func TestNetnsLeavesRoomForFolders(t *testing.T) {
	s := support(t)
	if !zygoteBuilt {
		t.Skip("no zygote in a build without cgo")
	}
	var names []string
	for i := range 61 {
		names = append(names, fmt.Sprintf("w%02d", i))
	}
	project := projectWith(t, append(names, "step")...)
	spec, folders, err := SpecFor(&manifest.Sandbox{Write: names}, project)
	if err != nil {
		t.Fatal(err)
	}
	defer folders.Close()
	for i := range 3 {
		tree, err := s.Start(Request{Spec: spec, Folders: folders, Argv: []string{"/bin/true"}, Dir: project + "/step", Read: []string{project},
			Write: []string{project + "/step"}, Env: []string{"PATH=/usr/bin:/bin"}, zygoteWait: true}, Stdio{})
		if err != nil {
			t.Fatal(err)
		}
		exit, _ := tree.Wait()
		tree.Finish(exit, "")
		if tree.Way() != WayZygote || exit != 0 {
			t.Fatalf("try %d: confined by %q, exit %d", i, tree.Way(), exit)
		}
	}
}
