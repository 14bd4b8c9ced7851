package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/template"
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
		return func(s string) (string, error) { return f(s), check(0) }
	}
	escape := func(f func(...any) string, grow int) func(...any) (string, error) {
		return func(args ...any) (string, error) {
			if err := check(grow * printedSize(args...)); err != nil {
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
			if err := check(2 * printedSize(v)); err != nil {
				return "", err
			}
			b, err := json.Marshal(v)
			return string(b), err
		},
		"print":    escape(fmt.Sprint, 1),
		"println":  escape(fmt.Sprintln, 1),
		"html":     escape(template.HTMLEscaper, 6),
		"js":       escape(template.JSEscaper, 6),
		"urlquery": escape(template.URLQueryEscaper, 3),
		"printf": func(format string, args ...any) (string, error) {
			if err := check(printfSize(format, args)); err != nil {
				return "", err
			}
			return fmt.Sprintf(format, args...), nil
		},
	}
}

// printedSize is about the most bytes fmt prints args in (a value of
// JSON's types: strings whole, a few bytes for other scalars, lists and
// maps with their separators).
func printedSize(args ...any) int {
	n := 0
	for _, a := range args {
		switch t := a.(type) {
		case string:
			n += len(t) + 1
		case []any:
			n += printedSize(t...) + 2
		case map[string]any:
			n += 5
			for k, v := range t {
				n += len(k) + printedSize(v) + 1
			}
		default:
			n += 24
		}
	}
	return n
}

// printfSize bounds what fmt.Sprintf(format, args) builds: the format,
// and for each verb its width and precision (at most fmt's 10^6 each)
// and, any argument being printable by any verb, the largest, six times
// over for the verbs that quote or hex-encode.
func printfSize(format string, args []any) int {
	largest := 0
	for _, a := range args {
		largest = max(largest, printedSize(a))
	}
	n := len(format)
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		j := i + 1
		for j < len(format) && strings.IndexByte("+-# 0", format[j]) >= 0 {
			j++
		}
		for part := 0; part < 2; part++ {
			num, k := 0, j
			for k < len(format) && format[k] >= '0' && format[k] <= '9' {
				num = min(num*10+int(format[k]-'0'), 1e6)
				k++
			}
			if k < len(format) && format[k] == '*' {
				num, k = 1e6, k+1
			}
			n, j = n+num, k
			if part == 0 && (j >= len(format) || format[j] != '.') {
				break
			}
			j++
		}
		grow := 1
		if j < len(format) && strings.IndexByte("qxXU", format[j]) >= 0 {
			grow = 6
		}
		n += grow * largest
		i = j
	}
	return n
}
