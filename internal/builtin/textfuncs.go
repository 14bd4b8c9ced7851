package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/template"

	"github.com/capflow/capflow/internal/jsonsize"
)

// textFuncs are text.render's functions: capflow's own, and the standard
// ones that build text in place of text/template's. Each stops once the
// template's budget (*live) has ended, and refuses a result past
// MaxRender before building it. A template cannot be interrupted: the
// buffer stops one that writes too much, but `print $a $a` doubling a
// string in a variable, a printf width or a join of a long list built
// gigabytes in one call and killed the worker (found attacking issue 57).
func textFuncs(live *context.Context) template.FuncMap {
	check := func(size int) error {
		if err := (*live).Err(); err != nil {
			return err
		}
		if size > MaxRender {
			return errTooLarge
		}
		return nil
	}
	same := func(f func(string) string) func(string) (string, error) {
		return func(s string) (string, error) {
			// A case change may grow a letter by half (ɐ, Ɐ): three times over.
			if err := check(3 * len(s)); err != nil {
				return "", err
			}
			return f(s), nil
		}
	}
	// escape is an escaper that first checks its arguments' text, then
	// what escaping it adds (grow: the bytes a byte may add).
	escape := func(f func(...any) string, grow func(byte) int) func(...any) (string, error) {
		return func(args ...any) (string, error) {
			if err := check(printedSize(args...)); err != nil {
				return "", err
			}
			text := fmt.Sprint(args...)
			n := len(text)
			for i := 0; i < len(text); i++ {
				n += grow(text[i])
			}
			if err := check(n); err != nil {
				return "", err
			}
			return f(args...), nil
		}
	}
	return template.FuncMap{
		tickFunc: func() (string, error) { return "", check(0) },
		"upper":  same(strings.ToUpper), "lower": same(strings.ToLower), "trim": same(strings.TrimSpace),
		"join": func(sep string, xs []any) (string, error) {
			if err := check(printedSize(xs...) + len(sep)*len(xs)); err != nil {
				return "", err
			}
			s := make([]string, len(xs))
			for i, x := range xs {
				s[i] = fmt.Sprint(x)
			}
			return strings.Join(s, sep), nil
		},
		"json": func(v any) (string, error) {
			if err := check(0); err != nil {
				return "", err
			}
			if !jsonsize.Within(v, MaxRender) {
				return "", errTooLarge
			}
			b, err := json.Marshal(v)
			return string(b), err
		},
		"print":    escape(fmt.Sprint, func(byte) int { return 0 }),
		"println":  escape(fmt.Sprintln, func(byte) int { return 1 }),
		"html":     escape(template.HTMLEscaper, escapedBy("<>&'\"\x00", 5)),
		"js":       escape(template.JSEscaper, escapedBy("\\'\"<>&=", 5)),
		"urlquery": escape(template.URLQueryEscaper, func(c byte) int { return 2 * btoi(!unreserved(c)) }),
		"printf": func(format string, args ...any) (string, error) {
			size, err := printfSize(format, args)
			if err == nil {
				err = check(size)
			}
			if err != nil {
				return "", err
			}
			return fmt.Sprintf(format, args...), nil
		},
	}
}

// printedSize is about the most bytes fmt prints args in (printed).
func printedSize(args ...any) int {
	n := 0
	for _, a := range args {
		if n > MaxRender {
			break
		}
		size, _ := printed(a)
		n += size
	}
	return n
}

// printed is about the most bytes fmt prints v in (a value of JSON's
// types: strings whole, a few bytes for other scalars, lists and maps with
// their separators), and how many values it prints one by one (each item
// of its lists and maps, at least one). It stops counting past MaxRender:
// a template repeating one large argument must not make counting its cost.
func printed(v any) (size, items int) {
	switch t := v.(type) {
	case string:
		return len(t) + 1, 1
	case json.Number:
		return len(t) + 1, 1
	case []any:
		size = 2
		for _, x := range t {
			if size > MaxRender {
				break
			}
			s, n := printed(x)
			size, items = size+s, items+n
		}
	case map[string]any:
		size = 5
		for k, x := range t {
			if size > MaxRender {
				break
			}
			s, n := printed(x)
			size, items = size+len(k)+s+1, items+n
		}
	default:
		return 24, 1
	}
	return size, max(items, 1)
}

// printfSize bounds what fmt.Sprintf(format, args) builds: the format;
// for each verb, its argument (the next one, or the one an [n] names),
// six times over for the verbs that quote or hex-encode, and its width,
// precision and a bad verb's note for each value in it (fmt applies them
// to each item of a list or map); each argument no verb takes (fmt
// prints it as EXTRA). A width or precision from an argument (*) is
// refused: it is a number the template computes.
func printfSize(format string, args []any) (int, error) {
	n, next := len(format), 0
	used := make([]bool, len(args))
	// Each argument is measured once, however many verbs print it, and
	// all of them at most once past MaxRender: fmt prints each (an unused
	// one as EXTRA), so arguments past it are refused uncounted.
	sizes, items := make([]int, len(args)), make([]int, len(args))
	total := 0
	for k, a := range args {
		if sizes[k], items[k] = printed(a); total+sizes[k] > MaxRender {
			return total + sizes[k], nil
		}
		total += sizes[k]
	}
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		j := i + 1
		for j < len(format) && strings.IndexByte("+-# 0", format[j]) >= 0 {
			j++
		}
		sharp := strings.Contains(format[i:j], "#")
		pad := 0
		for part := 0; part < 2; part++ {
			j, next = argIndex(format, j, next)
			if j < len(format) && format[j] == '*' {
				return 0, errors.New("printf: a width or precision from an argument (*) is not supported")
			}
			for ; j < len(format) && format[j] >= '0' && format[j] <= '9'; j++ {
				pad = min(pad*10+int(format[j]-'0'), 2e6)
			}
			if part == 1 || j >= len(format) || format[j] != '.' {
				break
			}
			j++
		}
		j, next = argIndex(format, j, next)
		if i = j; j >= len(format) || format[j] == '%' {
			continue
		}
		size, count := 24, 1 // a missing argument's note
		if next >= 0 && next < len(args) {
			size, count, used[next] = sizes[next], items[next], true
		}
		next++
		grow, each := 1, pad+24
		if strings.IndexByte("qxXU", format[j]) >= 0 {
			grow = 6
		}
		if strings.IndexByte("fF", format[j]) >= 0 {
			each += 310 // %f of 1e308 prints 309 digits
		}
		if sharp && format[j] == 'v' {
			grow, each = 8, each+16 // Go syntax: []interface {}{...}, quoted strings
		}
		if n += count*each + grow*size; n > MaxRender {
			return n, nil
		}
	}
	for k := range args {
		if !used[k] {
			n += items[k]*24 + sizes[k] + 16
		}
	}
	return n, nil
}

// argIndex reads an [n] at format[j:], if there is one: where the verb
// goes on, and the argument it takes next.
func argIndex(format string, j, next int) (int, int) {
	if j >= len(format) || format[j] != '[' {
		return j, next
	}
	k := strings.IndexByte(format[j:], ']')
	if k < 0 {
		return j, next
	}
	if x, err := strconv.Atoi(format[j+1 : j+k]); err == nil {
		next = x - 1
	}
	return j + k + 1, next
}

// escapedBy is what escaping adds for a byte: up to add for the bytes in
// set, control bytes and those past ASCII (a rune may be escaped whole).
func escapedBy(set string, add int) func(byte) int {
	return func(c byte) int { return add * btoi(c < 0x20 || c >= 0x80 || strings.IndexByte(set, c) >= 0) }
}

// unreserved: what a URL query keeps as it is.
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_.~", c) >= 0
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
