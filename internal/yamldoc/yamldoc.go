// Package yamldoc parses YAML (and JSON, a subset of it) into a tree that
// remembers the line and column of every key and value, so that manifest,
// plan and config errors can name the exact place in the file.
package yamldoc

import (
	"bytes"
	"fmt"
	"math"
	"strconv"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/lexer"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"

	"github.com/capflow/capflow/internal/caperr"
)

// Kind of a node.
type Kind int

// Node kinds.
const (
	Null Kind = iota
	Scalar
	Map
	Seq
)

// Pos is a 1-based position in a file.
type Pos struct{ Line, Column int }

// Node is one value of the document.
type Node struct {
	Kind  Kind
	Pos   Pos
	Value any // Scalar: string, bool, int64, uint64, float64
	Keys  []Key
	Items []*Node
}

// Key is one entry of a mapping, in file order.
type Key struct {
	Name  string
	Pos   Pos
	Value *Node
}

// Doc is a parsed file.
type Doc struct {
	File string
	Root *Node
}

// Bounds on what one document may cost, checked before or while parsing
// so hostile input (deep nesting, alias bombs, huge files) is refused with
// a positioned error instead of exhausting the stack, the memory or time.
const (
	// MaxFileSize is the largest YAML or JSON file capflow reads.
	MaxFileSize = 4 << 20
	// MaxDepth is the deepest nesting of mappings and sequences.
	MaxDepth = 200
	// MaxNodes is the most values a document may expand to, counting each
	// use of an alias as a copy of what it names.
	MaxNodes = 1000000
	// MaxTokens bounds the tokens a document may hold (values, keys,
	// commas, brackets, quotes, comments...), counted before the lexer
	// makes them: its memory and the parser's grow with them (~600 bytes
	// each), not with the file's size. A 20,000-step plan holds about
	// 300,000 in YAML, 500,000 as JSON; a 40,000-step one in flow style,
	// 720,000 (it must reach max_steps' refusal).
	MaxTokens = 1000000
	// MaxKeys is the most keys one block mapping may hold. The parser
	// reads a block mapping's keys recursively, each key copying the keys
	// after it: time quadratic in them (80,000 keys took 31 s; at 2,000
	// a mapping, 100 mappings 3 s and 1.1 GB). A flow mapping ({a: 1, b:
	// 2}) and JSON are read in one pass, and hold more.
	MaxKeys = 1000
	// MaxPlaceBytes bounds the places the parser keeps, each value's every
	// key above it, counted on the lexer's tokens (a plan's are a few MB).
	MaxPlaceBytes = 256 << 20
)

// Parse reads one YAML document. Syntax errors come back as a
// *caperr.Error with code INVALID_INPUT and the position of the fault.
func Parse(file string, data []byte) (*Doc, error) { return parse(file, data, false) }

// ParseLenient reads one YAML document whose keys may be written twice
// (the last one counts), within Parse's bounds: what a file refused for
// that would have said, read to tell the user (manifest.Declared).
func ParseLenient(file string, data []byte) (*Doc, error) { return parse(file, data, true) }

func parseHere(file string, data []byte, lenient bool) (doc *Doc, err error) {
	defer func() {
		// The parser is third-party code fed arbitrary bytes; a panic
		// there must become an error that names the file, never a crash.
		if r := recover(); r != nil {
			doc, err = nil, caperr.New(caperr.InvalidInput, "cannot parse YAML: %v", r).At(file, 0, 0, "")
		}
	}()
	if len(data) > MaxFileSize {
		return nil, caperr.New(caperr.InvalidInput, "file is %s, more than the %s allowed", sizeText(int64(len(data))), sizeText(MaxFileSize)).At(file, 0, 0, "")
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // a UTF-8 byte order mark
	if p, why := prescan(data); why != "" {
		return nil, caperr.New(caperr.InvalidInput, "%s", why).At(file, p.Line, p.Column, "")
	}
	var opts []parser.Option
	if lenient {
		opts = append(opts, parser.AllowDuplicateMapKey())
	}
	tokens := lexer.Tokenize(string(data))
	if p, why := checkTokens(tokens); why != "" {
		return nil, caperr.New(caperr.InvalidInput, "%s", why).At(file, p.Line, p.Column, "")
	}
	f, perr := parser.Parse(tokens, 0, opts...)
	if perr != nil {
		return nil, syntaxError(file, data, perr)
	}
	d := &Doc{File: file, Root: &Node{Kind: Null, Pos: Pos{1, 1}}}
	var bodies []ast.Node
	for _, doc := range f.Docs {
		if doc != nil && doc.Body != nil {
			if _, isComment := doc.Body.(*ast.CommentGroupNode); !isComment {
				bodies = append(bodies, doc.Body)
			}
		}
	}
	if len(bodies) > 1 {
		return nil, caperr.New(caperr.InvalidInput, "expected one YAML document, found %d", len(bodies)).At(file, pos(bodies[1].GetToken()).Line, 0, "")
	}
	if len(bodies) == 1 {
		c := &converter{file: file, anchors: map[string]*Node{}, sizes: map[*Node]extent{},
			maxAliasBytes: AliasBytes(len(data)), lenient: lenient}
		n, cerr := c.convert(bodies[0], 0)
		if cerr != nil {
			return nil, cerr
		}
		d.Root = n
	}
	return d, nil
}

func pos(t *token.Token) Pos {
	if t == nil || t.Position == nil {
		return Pos{}
	}
	return Pos{t.Position.Line, t.Position.Column}
}

type converter struct {
	file    string
	anchors map[string]*Node
	sizes   map[*Node]extent // expanded size of shared (anchored) nodes
	nodes   int64            // values so far, aliases expanded
	// aliasBytes are the bytes aliases copied so far, bounded by
	// maxAliasBytes (AliasBytes of the file's size).
	aliasBytes, maxAliasBytes int64
	lenient                   bool // a key written twice: the last counts
}

// extent is what a value expands to: its values and the bytes of its
// scalars and keys.
type extent struct{ values, bytes int64 }

// AliasBytes bounds the bytes a document's aliases may copy, from the
// size of its file: a small multiple of it, so a 3 MB plan that names a
// 3 MB string 300 times is refused as it is read, not after it has grown
// the process by a gigabyte.
func AliasBytes(fileSize int) int64 { return 2*int64(fileSize) + 1<<20 }

// size is what n expands to, memoised so shared nodes are counted once
// per computation (the count itself grows exponentially with an alias
// chain, the work does not).
func (c *converter) size(n *Node) extent {
	if v, ok := c.sizes[n]; ok {
		return v
	}
	total := extent{1, 8}
	if str, ok := n.Value.(string); ok {
		total.bytes += int64(len(str))
	}
	add := func(e extent) bool {
		total.values += e.values
		total.bytes += e.bytes
		return total.values > MaxNodes || total.bytes > c.maxAliasBytes
	}
	for _, k := range n.Keys {
		if add(extent{0, int64(len(k.Name))}) || add(c.size(k.Value)) {
			break
		}
	}
	for _, it := range n.Items {
		if add(c.size(it)) {
			break
		}
	}
	c.sizes[n] = total
	return total
}

func (c *converter) count(p Pos, n int64) error {
	c.nodes += n
	if c.nodes > MaxNodes {
		return c.errAt(p, "document expands to more than %d values (aliases count as copies)", MaxNodes)
	}
	return nil
}

// copied charges an alias's copy of v.
func (c *converter) copied(p Pos, v *Node) error {
	e := c.size(v)
	if err := c.count(p, e.values); err != nil {
		return err
	}
	c.aliasBytes += e.bytes
	if c.aliasBytes > c.maxAliasBytes {
		return c.errAt(p, "aliases expand the document by more than %s (its file is %s; aliases may copy at most twice that and 1 MiB)",
			sizeText(c.maxAliasBytes), sizeText((c.maxAliasBytes-1<<20)/2))
	}
	return nil
}

func (c *converter) errAt(p Pos, format string, args ...any) error {
	return caperr.New(caperr.InvalidInput, format, args...).At(c.file, p.Line, p.Column, "")
}

func (c *converter) convert(n ast.Node, depth int) (*Node, error) {
	if depth > MaxDepth {
		return nil, c.errAt(pos(n.GetToken()), "nesting deeper than %d levels", MaxDepth)
	}
	p := pos(n.GetToken())
	if _, alias := n.(*ast.AliasNode); !alias {
		if err := c.count(p, 1); err != nil {
			return nil, err
		}
	}
	switch t := n.(type) {
	case *ast.NullNode:
		return &Node{Kind: Null, Pos: p}, nil
	case *ast.MappingNode:
		out := &Node{Kind: Map, Pos: p}
		seen := map[string]int{} // key -> its index in out.Keys
		for _, mv := range t.Values {
			if err := c.addPair(out, seen, mv, depth); err != nil {
				return nil, err
			}
		}
		if len(t.Values) > 0 {
			out.Pos = pos(t.Values[0].Key.GetToken())
		}
		return out, nil
	case *ast.MappingValueNode:
		out := &Node{Kind: Map, Pos: pos(t.Key.GetToken())}
		return out, c.addPair(out, map[string]int{}, t, depth)
	case *ast.SequenceNode:
		out := &Node{Kind: Seq, Pos: p}
		for _, v := range t.Values {
			item, err := c.convert(v, depth+1)
			if err != nil {
				return nil, err
			}
			out.Items = append(out.Items, item)
		}
		return out, nil
	case *ast.AnchorNode:
		v, err := c.convert(t.Value, depth+1)
		if err != nil {
			return nil, err
		}
		c.anchors[t.Name.String()] = v
		return v, nil
	case *ast.AliasNode:
		name := t.Value.String()
		v, ok := c.anchors[name]
		if !ok {
			return nil, c.errAt(p, "unknown alias *%s", name)
		}
		if err := c.copied(p, v); err != nil {
			return nil, err
		}
		return v, nil
	case *ast.TagNode:
		return c.convert(t.Value, depth+1)
	case *ast.CommentGroupNode:
		return &Node{Kind: Null, Pos: p}, nil
	case *ast.LiteralNode:
		// Block scalars (| and >): GetValue returns the source form, the
		// string node inside holds the folded value.
		if t.Value == nil {
			return &Node{Kind: Scalar, Pos: p, Value: ""}, nil
		}
		return &Node{Kind: Scalar, Pos: p, Value: t.Value.Value}, nil
	case ast.ScalarNode:
		return c.scalar(t, p)
	}
	return nil, c.errAt(p, "unsupported YAML construct %s", n.Type())
}

// addPair adds a key and its value to m; seen indexes m's keys (a look
// through them all for each key cost minutes for 140,000 keys).
func (c *converter) addPair(m *Node, seen map[string]int, mv *ast.MappingValueNode, depth int) error {
	kp := pos(mv.Key.GetToken())
	if _, merge := mv.Key.(*ast.MergeKeyNode); merge {
		v, err := c.convert(mv.Value, depth+1)
		if err != nil {
			return err
		}
		// << takes a mapping or a list of mappings (earlier ones win).
		sources := []*Node{v}
		if v.Kind == Seq {
			sources = v.Items
		}
		for _, src := range sources {
			if src.Kind != Map {
				return c.errAt(kp, "merge key << needs a mapping or a list of mappings")
			}
			for _, k := range src.Keys {
				if _, ok := seen[k.Name]; !ok {
					seen[k.Name] = len(m.Keys)
					m.Keys = append(m.Keys, k)
				}
			}
		}
		return nil
	}
	key, ok := mv.Key.(ast.ScalarNode)
	if !ok {
		return c.errAt(kp, "mapping keys must be plain scalars")
	}
	name := fmt.Sprint(key.GetValue())
	if key.GetValue() == nil {
		name = "null"
	}
	at, dup := seen[name]
	if dup && !c.lenient {
		return c.errAt(kp, "duplicate key %q (first at line %d)", name, m.Keys[at].Pos.Line)
	}
	var v *Node
	if mv.Value == nil {
		v = &Node{Kind: Null, Pos: kp}
	} else {
		var err error
		if v, err = c.convert(mv.Value, depth+1); err != nil {
			return err
		}
	}
	if dup {
		m.Keys[at] = Key{Name: name, Pos: kp, Value: v} // lenient: the last one counts, as in most YAML tools
		return nil
	}
	seen[name] = len(m.Keys)
	m.Keys = append(m.Keys, Key{Name: name, Pos: kp, Value: v})
	return nil
}

func (c *converter) scalar(s ast.ScalarNode, p Pos) (*Node, error) {
	v := s.GetValue()
	switch x := v.(type) {
	case nil:
		return &Node{Kind: Null, Pos: p}, nil
	case string, bool, int64, uint64:
		return &Node{Kind: Scalar, Pos: p, Value: x}, nil
	case int:
		return &Node{Kind: Scalar, Pos: p, Value: int64(x)}, nil
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return nil, c.errAt(p, "%v is not a JSON number", x)
		}
		return &Node{Kind: Scalar, Pos: p, Value: x}, nil
	default:
		// Timestamps and other typed scalars: keep their text.
		return &Node{Kind: Scalar, Pos: p, Value: strconv.Quote(fmt.Sprint(x))[1 : len(strconv.Quote(fmt.Sprint(x)))-1]}, nil
	}
}

var tooMany = fmt.Sprintf("more than %d tokens (values, keys, commas, brackets, quotes, comments): split the document", MaxTokens)
