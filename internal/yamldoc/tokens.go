package yamldoc

import (
	"fmt"

	"github.com/goccy/go-yaml/token"
)

// level is a collection open at a point of the lexer's tokens, as the
// parser will nest it: a block one by its column, a flow one by its
// brackets.
type level struct {
	col        int  // a block collection's column (its keys' or its dashes')
	flow, list bool // flow ([ ] or { }); a list (dashes, or [ ])
	keys       int  // keys in a row: a block mapping's, a flow one's since its last comma
	place      int  // bytes its current entry adds to the place of what is in it
	entry      bool // a flow mapping's current entry has a token; and a ':'
	colon      bool
	line       int // a flow collection's line where its current entry began
}

// maxNulls bounds the values a document leaves out (a key or "- " with
// nothing after it, a flow set's key): the parser inserts a null token for
// each into its list of all tokens, moving the rest (600 KB of "-\n": 20 s).
const maxNulls = 1000

// tokenCheck is checkTokens' state.
type tokenCheck struct {
	open         []level
	place, flows int   // the bytes of the current place; flow levels open
	places       int64 // the bytes of every token's place so far
	props, docs  int   // tags and anchors in a row; document markers
	nulls        int   // values left out
	questions    int   // "? key"s whose ":" has not come
}

// checkTokens bounds what the parser will do with the lexer's tokens, read
// as the parser reads them (a block scalar or a quoted string is one token,
// whatever it holds): nesting past MaxDepth, a mapping read key after key
// with more than MaxKeys keys (the parser takes each in time growing with
// those after it: 80,000 took 31 s), more than one tag and one anchor on a
// value (each a level of the parser's recursion: 800,000 lone tags overflowed
// its stack), more than one document, and places past MaxPlaceBytes (the
// parser keeps each value's place, every key above it: a 500 KB key above
// 4,000 values took 2 GB).
func checkTokens(tks token.Tokens) (Pos, string) {
	var c tokenCheck
	for i, tk := range tks {
		if why := c.take(tks, i); why != "" {
			return pos(tk), why
		}
		if c.places += int64(c.place); c.places > MaxPlaceBytes {
			return pos(tk), fmt.Sprintf("the keys above its values are too long: the parser keeps each value's place (every key above it), more than %d MiB in all here; shorten the long keys", MaxPlaceBytes>>20)
		}
	}
	return Pos{}, ""
}

// take reads tks[i].
func (c *tokenCheck) take(tks token.Tokens, i int) string {
	tk := tks[i]
	switch tk.Type {
	case token.TagType:
		if why := c.tag(tks, i); why != "" {
			return why
		}
		fallthrough
	case token.AnchorType:
		if c.props++; c.props > 2 {
			return "more than one tag and one anchor on one value"
		}
		return ""
	case token.CommentType:
		return ""
	}
	if i > 0 && tks[i-1].Type == token.AnchorType {
		return "" // the anchor's name
	}
	c.props = 0
	if n := len(c.open); n > 0 && c.open[n-1].flow && tk.Type != token.CollectEntryType && tk.Type != token.MappingEndType {
		c.open[n-1].entry = true
	}
	switch tk.Type {
	case token.SequenceStartType, token.MappingStartType:
		c.flows++
		return c.push(level{flow: true, list: tk.Type == token.SequenceStartType, place: 8, line: tk.Position.Line})
	case token.SequenceEndType, token.MappingEndType:
		if why := c.endEntry(); why != "" {
			return why
		}
		c.closeFlow()
	case token.CollectEntryType:
		if why := c.endEntry(); why != "" {
			return why
		}
		c.nextEntry(tk.Position.Line)
	case token.DocumentHeaderType, token.DocumentEndType:
		if c.docs++; c.docs > 2 {
			return "expected one YAML document, found more"
		}
		c.open, c.place, c.flows, c.questions = c.open[:0], 0, 0, 0
	case token.SequenceEntryType:
		if why := c.empty(tks, i, tk.Position.Column); why != "" {
			return why
		}
		return c.dash(tk.Position.Column)
	case token.MappingKeyType:
		return c.question(tks, i)
	case token.MappingValueType:
		return c.colon(tks, i)
	}
	return ""
}

// question is a "? key" at tks[i]: a key at the "?"'s column, and a value
// left out until its ":" comes.
func (c *tokenCheck) question(tks token.Tokens, i int) string {
	if why := c.null(); why != "" {
		return why
	}
	c.questions++
	size := 0
	if i+1 < len(tks) {
		size = len(tks[i+1].Value)
	}
	return c.keyAt(tks[i].Position.Column, size, tks[i].Position.Line)
}

// nextEntry is a "," at line: the innermost flow collection's next entry,
// its keys (and those of block mappings written inside it) counted anew.
func (c *tokenCheck) nextEntry(line int) {
	for n := len(c.open) - 1; n >= 0; n-- {
		l := &c.open[n]
		l.keys = 0
		if l.flow {
			l.entry, l.colon, l.line = false, false, line
			return
		}
	}
}

// colon is a ": " at tks[i]: a key's, or a "? key"'s value.
func (c *tokenCheck) colon(tks token.Tokens, i int) string {
	if n := len(c.open); n > 0 && c.open[n-1].flow {
		c.open[n-1].colon = true
	}
	k := prev(tks, i)
	if k < 0 {
		return ""
	}
	if tks[k].Position.Line != tks[i].Position.Line && c.questions > 0 {
		c.questions-- // a "? key"'s value: its key and null counted at the "?"
		c.nulls = max(0, c.nulls-1)
		return ""
	}
	// A key whose ":" is on the next line (the parser takes a number's)
	// is a key like any other.
	col := keyCol(tks, k)
	if why := c.empty(tks, i, col); why != "" {
		return why
	}
	return c.keyAt(col, len(tks[k].Value), tks[k].Position.Line)
}

// tag checks the tag at tks[i] has its value on its line: the parser
// takes the next line's node as its value, a "- " at the same column too,
// so a tag ending each of a list's lines nests the list as deep as it is
// long (200 KB of "- !t" lines ran the process out of memory). A tag with
// no value (before a ",", ":" or bracket) is a value left out.
func (c *tokenCheck) tag(tks token.Tokens, i int) string {
	j := i + 1
	for j < len(tks) && tks[j].Type == token.CommentType {
		j++
	}
	switch {
	case j == len(tks) || tks[j].Position.Line != tks[i].Position.Line:
		return "a tag with no value on its line: write its value after it (a: !!str 1.0)"
	case tks[j].Type == token.CollectEntryType || tks[j].Type == token.MappingValueType ||
		tks[j].Type == token.SequenceEndType || tks[j].Type == token.MappingEndType:
		return c.null()
	}
	return ""
}

// prev is the index of the token before tks[i], comments aside; -1 for none.
func prev(tks token.Tokens, i int) int {
	for i--; i >= 0 && tks[i].Type == token.CommentType; i-- {
	}
	return i
}

// null counts a value left out.
func (c *tokenCheck) null() string {
	if c.nulls++; c.nulls > maxNulls {
		return fmt.Sprintf("more than %d values left out (a key or a \"- \" with nothing after it): write null where a value is empty", maxNulls)
	}
	return ""
}

// empty counts tks[i] (a "- " or a ": " of a key at col) as a value left
// out when nothing follows it: no token, one on a later line at col or left
// of it (but a key's list of dashes at its column), or the end of a flow
// entry.
func (c *tokenCheck) empty(tks token.Tokens, i, col int) string {
	j := i + 1
	for j < len(tks) && tks[j].Type == token.CommentType {
		j++
	}
	if j < len(tks) {
		next := tks[j]
		switch {
		case next.Type == token.CollectEntryType || next.Type == token.MappingEndType || next.Type == token.SequenceEndType:
		case next.Position.Line > tks[i].Position.Line && next.Position.Column <= col:
			if tks[i].Type == token.MappingValueType && next.Type == token.SequenceEntryType && next.Position.Column == col {
				return "" // "k:" above "- x": the list is its value
			}
		default:
			return ""
		}
	}
	return c.null()
}

// endEntry counts a flow mapping's entry with no ':' (a set's key) as a
// value left out.
func (c *tokenCheck) endEntry() string {
	if n := len(c.open); n > 0 && c.open[n-1].flow && !c.open[n-1].list && c.open[n-1].entry && !c.open[n-1].colon {
		return c.null()
	}
	return ""
}

func (c *tokenCheck) push(l level) string {
	c.open = append(c.open, l)
	c.place += l.place
	if len(c.open) > MaxDepth {
		return fmt.Sprintf("nesting deeper than %d levels", MaxDepth)
	}
	return ""
}

func (c *tokenCheck) pop() {
	l := c.open[len(c.open)-1]
	c.open, c.place = c.open[:len(c.open)-1], c.place-l.place
	if l.flow {
		c.flows--
	}
}

// closeFlow ends the innermost flow collection and what is open in it.
func (c *tokenCheck) closeFlow() {
	for c.flows > 0 {
		flow := c.open[len(c.open)-1].flow
		c.pop()
		if flow {
			return
		}
	}
}

// closeBlock ends the block collections a token at col is outside of:
// those right of it, and (for a key) a list of dashes at its column.
func (c *tokenCheck) closeBlock(col int, key bool) {
	for n := len(c.open); n > 0; n = len(c.open) {
		top := c.open[n-1]
		if top.flow || top.col < col || (top.col == col && !(key && top.list)) {
			return
		}
		c.pop()
	}
}

// dash is a "- " at col: an entry of the list at col.
func (c *tokenCheck) dash(col int) string {
	c.closeBlock(col, false)
	if n := len(c.open); n > 0 && !c.open[n-1].flow && c.open[n-1].col == col && c.open[n-1].list {
		return ""
	}
	return c.push(level{col: col, list: true, place: 8})
}

// keyCol is the column of the key tks[k], followed by ": ": the parser
// takes it from the tag or anchor before it on its line, if any.
func keyCol(tks token.Tokens, k int) int {
	key, col := tks[k], tks[k].Position.Column
	for j, props := k-1, 0; j >= 0 && props < 2 && tks[j].Position.Line == key.Position.Line; props++ {
		switch {
		case tks[j].Type == token.TagType:
			col, j = tks[j].Position.Column, j-1
		case j > 0 && tks[j-1].Type == token.AnchorType:
			col, j = tks[j-1].Position.Column, j-2 // an anchor and its name
		default:
			props = 2
		}
	}
	return col
}

// keyAt is a key of size bytes at col on line: a flow collection's, on
// the line its entry began, else one of the block mapping at col (inside
// brackets too: the parser nests block mappings there by their columns).
func (c *tokenCheck) keyAt(col, size, line int) string {
	if n := len(c.open); n == 0 || !c.open[n-1].flow || c.open[n-1].line != line {
		if c.closeBlock(col, true); len(c.open) == 0 || c.open[len(c.open)-1].flow || c.open[len(c.open)-1].col != col {
			if why := c.push(level{col: col}); why != "" {
				return why
			}
		}
	}
	top := &c.open[len(c.open)-1]
	c.place += size + 1 - top.place
	top.place = size + 1
	if top.keys++; top.keys > MaxKeys {
		return fmt.Sprintf("more than %d keys in one mapping: write one this large in flow style ({k: v, ...}) or as JSON, which are read in one pass", MaxKeys)
	}
	return ""
}
