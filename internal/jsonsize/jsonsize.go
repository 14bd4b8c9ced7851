// Package jsonsize bounds what a value of JSON's types encodes to, without
// encoding it: a value many references share counts each time, as every
// encoding of the value holding them spells it out.
package jsonsize

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// Within reports whether v, as encoding/json encodes it, takes at most
// about limit bytes (never fewer than it takes, for JSON's types; a
// number of another type counts as the longest a float64 prints). It
// stops counting once past limit.
func Within(v any, limit int) bool {
	left := limit
	return walk(v, &left)
}

func walk(v any, left *int) bool {
	switch t := v.(type) {
	case string:
		*left -= String(t)
	case json.Number:
		*left -= len(t)
	case map[string]any:
		*left -= 2
		for k, x := range t {
			if *left -= String(k) + 1; *left < 0 || !walk(x, left) {
				return false
			}
		}
	case []any:
		*left -= 2
		for _, x := range t {
			if *left--; *left < 0 || !walk(x, left) {
				return false
			}
		}
	case nil:
		*left -= 4
	case bool:
		*left -= 5
	case float64:
		// As 'g' prints it, and room for encoding/json's exponent form.
		var buf [32]byte
		*left -= len(strconv.AppendFloat(buf[:0], t, 'g', -1, 64)) + 2
	default:
		*left -= 24
	}
	return *left >= 0
}

// String is what s encodes to: its quotes, and six bytes for each byte
// encoding/json escapes (control characters, quote, backslash, <, >, &),
// for each U+2028 and U+2029, and for every byte of a string that is not
// UTF-8 (each may become \ufffd).
func String(s string) int {
	if !utf8.ValidString(s) {
		return 6*len(s) + 2
	}
	n := len(s) + 2
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20, c == '"', c == '\\', c == '<', c == '>', c == '&':
			n += 5
		case c == 0xe2 && i+2 < len(s) && s[i+1] == 0x80 && (s[i+2] == 0xa8 || s[i+2] == 0xa9):
			n += 3
		}
	}
	return n
}
