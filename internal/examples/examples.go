// Package examples reads the promises the example plans make in their
// "# expect: check=STATUS run=STATUS" comment, so tests hold them to it.
package examples

import (
	"bufio"
	"os"
	"strings"
)

// Expect returns the check and run statuses an example promises ("" when
// it does not say).
func Expect(file string) (check, run string, err error) {
	f, err := os.Open(file)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "# expect: ")
		if !ok {
			continue
		}
		for _, kv := range strings.Fields(rest) {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "check":
				check = v
			case "run":
				run = v
			}
		}
	}
	return check, run, sc.Err()
}

// NeedsFFmpeg reports whether an example's promise depends on ffmpeg
// ("check=partial-complete without ffmpeg, ready with ffmpeg"): such a plan
// is ready, and runs, only where ffmpeg is installed.
func NeedsFFmpeg(file string) bool {
	b, err := os.ReadFile(file)
	return err == nil && strings.Contains(string(b), "ready with ffmpeg")
}
