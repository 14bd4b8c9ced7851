package sandbox

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// zygoteWords is a request as the zygote reads it: the mounts
// (mountArgs, folders by their index in the files sent), the working
// folder, the network namespace made for it (its index), rlimits, the
// environment, then the command, each word ended by a NUL. A word holding
// a NUL is refused: it would be read as two.
func (s *Support) zygoteWords(req Request, limits []rlimit) ([]byte, error) {
	req.asStepUser = s.stepUser.Load() // the zygote's own answer (zygote_ids_linux.c)
	w := s.mountArgs(req)
	if req.Dir != "" {
		w = append(w, "--chdir", req.Dir)
	}
	if req.netns > 0 {
		w = append(w, "--netns", strconv.Itoa(req.netns))
	}
	if req.ctl > 0 {
		w = append(w, "--ctl", strconv.Itoa(req.ctl))
	}
	for _, l := range limits {
		w = append(w, "--rlimit", strconv.Itoa(l.Resource), strconv.FormatUint(l.Cur, 10), strconv.FormatUint(l.Max, 10))
	}
	for _, kv := range envIn(req) {
		w = append(w, "--env", kv)
	}
	w = append(append(w, "--"), s.commandIn(req)...)
	var b []byte
	for _, x := range w {
		if strings.IndexByte(x, 0) >= 0 {
			return nil, fmt.Errorf("an argument or variable holds a NUL byte: %q", x)
		}
		b = append(append(b, x...), 0)
	}
	if len(b) > zygoteMax {
		return nil, errTooLarge
	}
	return b, nil
}

var errTooLarge = errors.New("the command and its environment are too large for the zygote")
