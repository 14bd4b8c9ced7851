package yamldoc

import (
	"fmt"

	"github.com/goccy/go-yaml/token"
)

// keyRun is a block mapping open at a point of the document: its keys'
// column and how many it has held so far.
type keyRun struct{ col, n int }

// checkTokens bounds what the parser will do with the lexer's tokens, read
// as the parser reads them (a block scalar or a quoted string is one token,
// whatever it holds): flow nesting past MaxDepth and a block mapping with
// more than MaxKeys keys. prescan bounded the tokens' number before the
// lexer made them; this is exact where prescan reads the text.
func checkTokens(tks token.Tokens) (Pos, string) {
	depth := 0
	var open []keyRun
	for i, tk := range tks {
		switch tk.Type {
		case token.SequenceStartType, token.MappingStartType:
			if depth++; depth > MaxDepth {
				return pos(tk), fmt.Sprintf("nesting deeper than %d levels", MaxDepth)
			}
		case token.SequenceEndType, token.MappingEndType:
			depth = max(0, depth-1)
		case token.DocumentHeaderType, token.DocumentEndType:
			open = open[:0]
		case token.SequenceEntryType:
			if depth == 0 {
				open = closeRight(open, tk.Position.Column)
			}
		case token.MappingValueType:
			if depth > 0 || i == 0 {
				continue
			}
			key := tks[i-1]
			if open = closeRight(open, key.Position.Column); len(open) == 0 || open[len(open)-1].col != key.Position.Column {
				open = append(open, keyRun{col: key.Position.Column})
			}
			top := &open[len(open)-1]
			if top.n++; top.n > MaxKeys {
				return pos(key), fmt.Sprintf("more than %d keys in one mapping: write one this large in flow style ({k: v, ...}) or as JSON, which are read in one pass", MaxKeys)
			}
		}
	}
	return Pos{}, ""
}

// closeRight ends the block mappings whose keys lie right of col: a key or
// a list item at col is outside them.
func closeRight(open []keyRun, col int) []keyRun {
	for len(open) > 0 && open[len(open)-1].col > col {
		open = open[:len(open)-1]
	}
	return open
}
