package sandbox

import (
	"os"
	"strings"
	"testing"
)

// TestZygoteRefusesWhatItDoesNotMake: the zygote starts nothing for a
// request it cannot read whole (a mount of a kind it does not make, a word
// missing, a descriptor it was not given, no command) and goes on serving;
// a word holding a NUL (which would read as two) never reaches it.
func TestZygoteRefusesWhatItDoesNotMake(t *testing.T) {
	s := support(t)
	if !zygoteBuilt {
		t.Fatal("built without cgo: no zygote to test")
	}
	cg, err := s.takeCgroup(true)
	if err != nil {
		t.Fatal(err)
	}
	defer s.release(cg)
	s.waitZygote(cg)
	z, err := s.zygoteFor(cg)
	if err != nil {
		t.Fatal(err)
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	stdio := []*os.File{null, null, null}
	words := func(w ...string) []byte { return []byte(strings.Join(w, "\x00") + "\x00") }
	for _, c := range []struct {
		req  []byte
		want string
	}{
		{words("--dev-bind", "/", "/x", "--", "/bin/true"), "--dev-bind is not a mount the zygote makes"},
		{words("--tmpfs"), "--tmpfs needs its arguments"},
		{words("--rlimit", "1", "2"), "--rlimit needs its arguments"},
		{words("--chdir", "/"), "no command"},
		{words("--bind-fd", "7", "/x", "--", "/bin/true"), "--bind-fd 7"},
		{words("--bind-fd", "1", "/x", "--", "/bin/true"), "--bind-fd 1"},
	} {
		pid, err := z.spawn(c.req, stdio)
		if pid > 0 {
			p, _ := os.FindProcess(pid)
			_, _ = p.Wait()
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.req, err, c.want)
		}
	}
	if _, err := s.zygoteWords(Request{Argv: []string{"/bin/true", "x\x00--bind\x00/\x00/"}}, nil); err == nil {
		t.Fatal("an argument holding a NUL was sent")
	}
	pid, err := z.spawn(words("--", "/bin/true"), stdio)
	if err != nil || pid <= 0 {
		t.Fatalf("after the refusals: %d %v", pid, err)
	}
	p, _ := os.FindProcess(pid)
	if st, err := p.Wait(); err != nil || !st.Success() {
		t.Fatalf("/bin/true: %v %v", st, err)
	}
}
