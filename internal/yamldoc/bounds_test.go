package yamldoc

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goccy/go-yaml/token"

	"github.com/capflow/capflow/internal/caperr"
)

// aliasBomb is the billion-laughs document: each level names the previous
// one ten times, so n levels expand to 10^n values.
func aliasBomb(levels int) string {
	var b strings.Builder
	b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < levels; i++ {
		p := fmt.Sprintf("*a%d", i-1)
		fmt.Fprintf(&b, "a%d: &a%d [%s]\n", i, i, strings.Repeat(p+", ", 9)+p)
	}
	return b.String()
}

func TestHostileDocuments(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, src, want string
		line            int
	}{
		{"alias bomb", aliasBomb(10), "aliases expand the document by more than", 5},
		// hostile findings at 6003afe, 7: a 3 MB string named 300 times
		// (900 MB) is refused as the file is read.
		{"alias bytes", "big: &a \"" + strings.Repeat("x", 3<<20) + "\"\nc: [" + strings.Repeat("*a, ", 299) + "*a]\n", "aliases expand the document by more than 7.0 MiB", 2},
		{"deep flow brackets", strings.Repeat("[", 50000), "nesting deeper than", 1},
		{"deep flow maps", "x: " + strings.Repeat("{a: ", 300), "nesting deeper than", 1},
		{"dash chain", strings.Repeat("- ", 50000) + "x", "nesting deeper than", 1},
		{"too large", "a: " + strings.Repeat("x", MaxFileSize), "more than the", 0},
		// A quote in a block scalar or inside a plain value opens no
		// string to the prescan (it did, and hid the rest of the file
		// from its bounds: 100,000 brackets after it kept the parser 32 s).
		{"quote in a block scalar", "a: |\n  say \"hi\nb: " + list(MaxTokens+1), "more than", 3},
		{"quote inside a plain value", "a: x 'y\nb: " + list(MaxTokens+1), "more than", 2},
		{"escaped line end", "a: \"x\\\nb: " + list(MaxTokens+1), "more than", 2},
		// Brackets and comments are tokens too.
		{"many brackets", strings.Repeat("[]", MaxTokens/2+1), "more than", 1},
		{"many comments", strings.Repeat("#\n", MaxTokens+1), "more than", MaxTokens + 1},
		// One block mapping's keys are read in quadratic time: bounded.
		{"keys", keys("", MaxKeys+1), "more than 1000 keys in one mapping", MaxKeys + 1},
		{"keys in a list item", "- " + keys("  ", MaxKeys+1)[2:], "more than 1000 keys in one mapping", MaxKeys + 1},
		// Found attacking the bounds above: what slipped past them.
		// Lone tags or anchors, each a level of the parser's recursion
		// (800,000 overflowed its stack, which no recover catches).
		{"tags in a row", strings.Repeat("!t ", 1000) + "x\n", "more than one tag and one anchor", 1},
		{"anchors in a row", strings.Repeat("&a\n", 1000) + "x\n", "more than one tag and one anchor", 3},
		{"tags past the count", strings.Repeat("!\n", MaxTokens+1), "more than", MaxTokens + 1},
		// Keys the parser reads as one mapping, wherever they are.
		{"keys in a flow list", "[\n" + keys("", MaxKeys+1) + "]\n", "more than 1000 keys in one mapping", MaxKeys + 2},
		{"keys each above a list", strings.Repeat("k:\n- x\n", MaxKeys) + "k:\n", "more than 1000 keys in one mapping", 2*MaxKeys + 1},
		{"tagged keys each above a list", strings.Repeat("!t k:\n- x\n", MaxKeys) + "!t k:\n", "more than 1000 keys in one mapping", 2*MaxKeys + 1},
		// A chain of dashes after a key nests as one at a line's start
		// (100,000 took 28 s and 14.7 GB).
		{"dash chain after a key", "? a\n: " + strings.Repeat("- ", 100000) + "x\n", "nesting deeper than", 2},
		// Each value keeps its place, every key above it (a 500 KB key
		// above 4,000 values took 2 GB).
		{"long key above many values", strings.Repeat("k", 500000) + ": " + list(4000), "keys above its values are too long", 1},
		// Documents: the lexer's list of them is built in quadratic time.
		{"document markers", strings.Repeat("---\n...\n", 100000), "expected one YAML document", 3},
		// A lone CR is a line break to the lexer: a comment ends there.
		{"comment ended by a CR", "#\r" + list(MaxTokens+1), "more than", 2},
		// A quote on a plain value's next line opens no string.
		{"quote on a plain value's next line", "[a\n'" + strings.Repeat(",a", MaxTokens) + "]\n", "more than", 2},
		// Aliases, quotes, tags count as the tokens they are.
		{"aliases", strings.Repeat("*a\n", MaxTokens+1), "more than", MaxTokens + 1},
		{"quoted values", strings.Repeat(`""`+"\n", MaxTokens+1), "more than", MaxTokens + 1},
		// Found attacking those fixes. What go-yaml's lexer reads in
		// quadratic time: blank lines trimmed from a block scalar one at
		// a time (100,000: 27 s), tabs in a quoted string (7 s), a run of
		// '<' (3.4 s).
		{"blank lines after a block scalar", "a: |\n  x\n" + strings.Repeat("\n", 100000), "blank lines in a row", 23},
		{"tabs in a string", "a: \"" + strings.Repeat("\tx", 60000) + "\"\n", "tabs", 1},
		{"angles", "a: " + strings.Repeat("<", 100000), "'<' in a row", 1},
		// Found attacking again: summed over the file.
		{"tabs on many lines", "a: \"\n" + strings.Repeat("x"+strings.Repeat("\t", 8185)+"x\n", 510) + "\"\n", "too many tabs", 3},
		{"angles in many runs", "a: " + strings.Repeat(strings.Repeat("<", 1000)+" ", 4000), "'<' in a row", 1},
		// A tag ending its line takes the next line's node, a "- " at its
		// column too: 200 KB of "- !t" lines ran the process out of
		// memory. A tag with no value is a value left out (a flow list of
		// 299,000 "!!str,": 37 s).
		{"tags ending their lines", strings.Repeat("- !t\n", 40000), "a tag with no value on its line", 1},
		{"tagged keys ending their lines", strings.Repeat(strings.Repeat("k", 1000)+": !t\n", 2000), "a tag with no value on its line", 1},
		{"tags with no value", "[" + strings.Repeat("!!str,", 299000) + "x]\n", "values left out", 1},
		// Found in a fourth attack, past every bound above: a key whose
		// ":" is on the next line (a number's: the parser lets it) is
		// counted by none, and block mappings inside brackets nest
		// unseen. Each ran the process out of memory; a document past
		// 64 KiB is read in a child, whose memory is capped.
		{"a key with its colon below", "1." + strings.Repeat("5", 1<<20) + "\n: " + list(3000), "keys above its values are too long", 2},
		{"a key with its colon below, read in place", "1." + strings.Repeat("5", 30000) + "\n: " + list(14000), "keys above its values are too long", 2},
		{"keys with their colons below", strings.Repeat("1\n: v\n", 100000), "keys in one mapping", 2*MaxKeys + 2},
		{"block mappings inside brackets", nestedInBrackets(150, 150, 250000), "keys above its values are too long", 152},
		// Values left out, a null token each moved into the parser's list
		// (600 KB of "-\n": 20 s; a flow set of 300,000 keys: 42 s).
		{"dashes with nothing after", strings.Repeat("-\n", 100000), "values left out", maxNulls + 1},
		{"a flow set", "{" + strings.TrimSuffix(strings.ReplaceAll(keys("", 100000), ": v\n", ", "), ", ") + "}", "values left out", 1},
		{"keys with nothing after", strings.Repeat("k:\n", 100000), "values left out", maxNulls + 1},
		// "? key" keys are counted at the "?", where the parser puts them:
		// keys without ": " escaped the count (120,000: 47 s), and one
		// key's 1 MiB fell out of the places (4 GB).
		{"question keys", strings.Repeat("? k\n: v\n", 100000), "keys in one mapping", 2*MaxKeys + 1},
		{"question keys with nothing after", strings.Repeat("? k\n", 100000), "values left out", maxNulls + 1},
		{"a long question key", "? " + strings.Repeat("k", 1<<20) + "\n:\n" + keys("  ", 300), "keys above its values are too long", 87},
		// What the prescan read as a comment or a string while the lexer
		// read tokens: a quoted key after a plain value (815 MB), a quote
		// after a plain key's ":" in brackets (736 MB), a quote after a
		// comma in a plain value, a directive's words, reserved '@'.
		{"quoted key after a plain value", "a: x\n' #': " + list(MaxTokens), "more than", 2},
		{"quote after a plain key in brackets", "[x:'" + strings.Repeat(",a", MaxTokens) + "]\n", "more than", 1},
		{"quote after a comma in a plain value", "a: x,'" + strings.Repeat("b: ", MaxTokens), "more than", 1},
		{"a directive's words", "%" + strings.Repeat(" a", MaxTokens) + "\n---\nx\n", "more than", 1},
		{"reserved indicators", strings.Repeat("@", MaxTokens+1), "more than", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// ParseLenient keeps every bound Parse has.
			for _, parse := range []func(string, []byte) (*Doc, error){Parse, ParseLenient} {
				_, err := parse("hostile.yaml", []byte(c.src))
				var ce *caperr.Error
				if err == nil || caperr.CodeOf(err) != caperr.InvalidInput || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("want INVALID_INPUT %q, got %v", c.want, err)
				}
				if ok := asErr(err, &ce); !ok || ce.File != "hostile.yaml" || ce.Line != c.line {
					t.Fatalf("want hostile.yaml line %d, got %v", c.line, err)
				}
			}
		})
	}
	// Brackets inside quotes and comments are text, not nesting.
	ok := "a: \"" + strings.Repeat("[", 300) + "\"\nb: '" + strings.Repeat("{", 300) + "'\n# " + strings.Repeat("[", 300) + "\n"
	if _, err := Parse("ok.yaml", []byte(ok)); err != nil {
		t.Fatalf("quoted brackets: %v", err)
	}
	// Keys in a block scalar are its text; each mapping counts its own.
	many := "a: |\n" + keys("  ", 3*MaxKeys) + "b:\n" + keys("  ", MaxKeys) + "c:\n- " + keys("  ", MaxKeys)[2:] + "- " + keys("  ", MaxKeys)[2:] + keys("", MaxKeys-3)
	if _, err := Parse("ok.yaml", []byte(many)); err != nil {
		t.Fatalf("keys of several mappings: %v", err)
	}
	// Brackets inside a plain value or a block scalar's text nest nothing.
	text := "a: |\n" + strings.Repeat("  echo \"[\"\n", 2*MaxDepth) + "b:\n" + strings.Repeat("- see [1\n", 2*MaxDepth)
	if d, err := Parse("ok.yaml", []byte(text)); err != nil || len(d.Root.Get("b").Items) != 2*MaxDepth {
		t.Fatalf("brackets in text: %v", err)
	}
	// A 20,000-step plan reads, in YAML and as JSON, pretty or compact.
	for name, plan := range bigPlans(20000) {
		if d, err := Parse(name, plan); err != nil || len(d.Root.Get("steps").Items) != 20000 {
			t.Fatalf("%s: %v", name, err)
		}
	}
	// Read in a child, a document is what it is read in place.
	for name, plan := range bigPlans(2000) {
		here, err := parseHere(name, plan, false)
		if err != nil || len(plan) <= childBytes {
			t.Fatalf("%s (%d bytes): %v", name, len(plan), err)
		}
		if there, err := Parse(name, plan); err != nil || !reflect.DeepEqual(here, there) {
			t.Fatalf("%s: read in a child, not what it is in place: %v", name, err)
		}
	}
	// A flow mapping is read in one pass and may hold more.
	if d, err := Parse("ok.yaml", []byte("{"+strings.TrimSuffix(strings.ReplaceAll(keys("", 3*MaxKeys), "\n", ", "), ", ")+"}")); err != nil || len(d.Root.Keys) != 3*MaxKeys {
		t.Fatalf("a flow mapping of many keys: %v", err)
	}
	// A few shared aliases are fine.
	if d, err := Parse("ok.yaml", []byte(aliasBomb(4))); err != nil || len(d.Root.Keys) != 4 {
		t.Fatalf("small alias use: %v", err)
	}
}

// ParseLenient reads a key written twice, where Parse refuses it: the
// last one counts, in the first one's place.
func TestParseLenientReadsAKeyWrittenTwice(t *testing.T) {
	src := []byte("a: 1\nb: [x]\na: {c: 2}\n")
	if _, err := Parse("twice.yaml", src); err == nil {
		t.Fatal("Parse took a key written twice")
	}
	d, err := ParseLenient("twice.yaml", src)
	if err != nil || len(d.Root.Keys) != 2 || d.Root.Keys[0].Name != "a" || fmt.Sprint(d.Root.Get("a").Interface()) != "map[c:2]" {
		t.Fatalf("%v: %+v", err, d)
	}
}

// bigPlans is a plan of n steps in YAML and as JSON, pretty and compact.
func bigPlans(n int) map[string][]byte {
	var y, j strings.Builder
	y.WriteString("name: big\nsteps:\n")
	j.WriteString("{\n  \"name\": \"big\",\n  \"steps\": [\n")
	for i := range n {
		fmt.Fprintf(&y, "  - id: s%d\n    capability: text.render\n    with: {template: \"hello, {{ .x }}\", x: 'y'}\n    needs: [s%d]\n", i, i-1)
		sep := ","
		if i == n-1 {
			sep = ""
		}
		fmt.Fprintf(&j, "    {\n      \"id\": \"s%d\",\n      \"capability\": \"text.render\",\n      \"with\": {\"template\": \"hello, {{ .x }}\", \"x\": \"y\"},\n      \"needs\": [\"s%d\"]\n    }%s\n", i, i-1, sep)
	}
	j.WriteString("  ]\n}\n")
	compact := strings.NewReplacer("\n", "", "  ", "", ": ", ":", ", ", ",").Replace(j.String())
	return map[string][]byte{"plan.yaml": []byte(y.String()), "plan.json": []byte(j.String()), "compact.json": []byte(compact)}
}

// nestedInBrackets is a flow list holding keys block mappings deep, each
// key size bytes, above a list of n values.
func nestedInBrackets(keys, size, n int) string {
	var b strings.Builder
	b.WriteString("[\n")
	for i := range keys {
		b.WriteString(strings.Repeat(" ", i) + strings.Repeat("k", size) + ":\n")
	}
	return b.String() + strings.Repeat(" ", keys) + list(n) + "]\n"
}

// list is a flow sequence of n values.
func list(n int) string { return "[" + strings.Repeat("1,", n-1) + "1]\n" }

// keys is n lines "k<i>: v", each after indent.
func keys(indent string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%sk%d: v\n", indent, i)
	}
	return b.String()
}

func asErr(err error, ce **caperr.Error) bool {
	e, ok := err.(*caperr.Error)
	*ce = e
	return ok
}

func TestReadFileRefusesSpecialFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero.yaml")
	os.Symlink("/dev/zero", zero)
	big := filepath.Join(dir, "big.yaml")
	f, _ := os.Create(big)
	f.Truncate(MaxFileSize + 1)
	f.Close()
	for p, want := range map[string]string{fifo: "not a regular file", zero: "not a regular file", big: "more than the", dir: "directory", filepath.Join(dir, "none"): "does not exist"} {
		_, err := ReadFile(p, filepath.Base(p))
		if caperr.CodeOf(err) != caperr.InvalidInput || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: want %q, got %v", p, want, err)
		}
	}
	if _, err := ReadFile(filepath.Join(dir, "none"), "none"); !os.IsNotExist(err) && !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing: %v", err)
	}
}

func TestNewUserDocuments(t *testing.T) {
	t.Parallel()
	// A byte order mark (editors on Windows) is not part of the first key.
	d, err := Parse("bom.yaml", []byte("\xef\xbb\xbfname: x\n"))
	if err != nil || d.Root.Get("name") == nil {
		t.Fatalf("BOM: %v", err)
	}
	// A merge key over a list of mappings.
	d, err = Parse("m.yaml", []byte("a: &a {x: 1}\nb: &b {y: 2}\nc:\n  <<: [*a, *b]\n  z: 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := d.Root.Get("c")
	if c.Get("x") == nil || c.Get("y") == nil || c.Get("z") == nil {
		t.Fatalf("merge list: %v", c.Interface())
	}
	// Many small values: refused before the parser spends memory on them.
	_, err = Parse("many.yaml", []byte("x: ["+strings.Repeat("1,", MaxTokens+1)+"1]"))
	if err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("token bound: %v", err)
	}
}

// formatted is a parser error whose Error() goccy builds by printing the
// tokens of the error's lines, each appended to a growing string.
type formatted struct{}

func (formatted) Error() string      { panic("the parser's error was formatted") }
func (formatted) GetMessage() string { return "',' or ']' must be specified" }
func (formatted) GetToken() *token.Token {
	return &token.Token{Position: &token.Position{Line: 1, Column: 6}}
}

// A syntax error is told from its message and token, never by formatting
// the parser's error: an unclosed list of 150,000 items took 12 s there.
func TestSyntaxErrorsAreNotFormattedByTheParser(t *testing.T) {
	t.Parallel()
	err := syntaxError("x.yaml", []byte("[a, b\n"), formatted{})
	var ce *caperr.Error
	if !asErr(err, &ce) || ce.Line != 1 || !strings.Contains(err.Error(), "is not closed") {
		t.Fatalf("%v", err)
	}
	_, err = Parse("x.yaml", []byte(list(150000)[:150000*2-1]))
	if !asErr(err, &ce) || ce.Line != 1 || !strings.Contains(err.Error(), "']' not found") {
		t.Fatalf("an unclosed list: %v", err)
	}
}

// What the bounds still miss costs a child, stopped at its memory or its
// time (lowered here: not parallel, so no other test reads meanwhile).
// go-yaml skips a character after each tab in a quoted string, here the
// line's end and the "#" that makes the rest a comment to the prescan,
// and makes 4 million tokens of it: 10 s and 1.8 GB.
func TestTheChildIsCapped(t *testing.T) {
	missed := []byte("[\"x\t\tx\"\n#" + strings.Repeat(",1", 2000000) + "\n]\n")
	memory, limit := childMemory, childTime
	defer func() { childMemory, childTime = memory, limit }()
	for _, c := range []struct {
		memory int64
		limit  time.Duration
		want   string
	}{{256 << 20, time.Minute, "needs more than 256 MiB"}, {4 << 30, time.Second, "took more than 1s"}} {
		childMemory, childTime = c.memory, c.limit
		_, err := Parse("missed.yaml", missed)
		if caperr.CodeOf(err) != caperr.InvalidInput || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("want %q, got %v", c.want, err)
		}
	}
}
