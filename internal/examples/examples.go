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
