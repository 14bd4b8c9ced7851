// Package runfolder names the folders of runs and steps inside runs_dir
// (docs/workflow.md): the activities write there, the console reads.
// Names come from IDs, never from history, and cannot leave their parent.
package runfolder

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// maxName keeps a run folder's name well within a file name's 255 bytes;
// longer IDs end in a digest of the whole ID.
const maxName = 180

// Name is the folder name of a workflow ID: letters, digits and '-' stay,
// '.' too unless it leads; every other byte becomes _XX (hex), so distinct
// IDs give distinct names ("a/b" → a_2fb, "a_b" → a_5fb). Case is kept:
// on a case-insensitive file system (not where workers run) "Run-A" and
// "run-a" would share a folder.
func Name(id string) string {
	var b strings.Builder
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '.' && i > 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "_%02x", c)
		}
	}
	name := b.String()
	if name == "" {
		return "_"
	}
	if len(name) > maxName {
		sum := sha256.Sum256([]byte(id))
		name = name[:maxName-33] + "~" + hex.EncodeToString(sum[:16])
	}
	return name
}

// Safe keeps step ids (and, before Name, workflow ids) from escaping
// their folder.
func Safe(s string) string {
	out := []rune{}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			out = append(out, r)
		default:
			out = append(out, '_')
		}
	}
	if len(out) == 0 || string(out) == "." || string(out) == ".." {
		return fmt.Sprintf("run-%x", s)
	}
	return string(out)
}

// Records is where the engine keeps a step's records in its run's folder
// (runDir/records/<Safe(id)>, items/<index> beneath it): what the step
// was given (input.json), its failed attempts, the start of a
// non-idempotent step, its stored output (data.json). No tool or server
// of the run writes there: a tool writes its step folder (Step), a server
// its own.
func Records(runDir, id string, index int) string {
	dir := filepath.Join(runDir, "records", Safe(id))
	if index >= 0 {
		dir = filepath.Join(dir, "items", strconv.Itoa(index))
	}
	return dir
}

// Step is a step's folder in its run's folder: runDir/steps/<Safe(id)>,
// and for item index of a for_each step (index >= 0) items/<index>
// beneath it.
func Step(runDir, id string, index int) string {
	dir := filepath.Join(runDir, "steps", Safe(id))
	if index >= 0 {
		dir = filepath.Join(dir, "items", strconv.Itoa(index))
	}
	return dir
}
