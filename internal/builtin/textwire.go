package builtin

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/schema"
)

// A template's request and answer between the worker and its text child,
// in a small encoding of their own: values keep their Go types (an int64,
// a float64 and a json.Number print and compare differently in a
// template), and a small request costs microseconds, where gob spent
// about 40 µs a request on describing its types.

// Tags of the values' encoding.
const (
	tagNil byte = iota
	tagFalse
	tagTrue
	tagString
	tagInt
	tagInt64
	tagUint64
	tagFloat
	tagNumber
	tagMap
	tagList
)

var errUnsupported = errors.New("a value of a type JSON does not carry")

// errTooMuch is an encoding past its writer's max.
var errTooMuch = errors.New("larger than the budget")

// wireWriter appends an encoding to b, failing once it passes max bytes
// (0: no bound).
type wireWriter struct {
	b   []byte
	max int
}

func (w *wireWriter) uvarint(n uint64) { w.b = binary.AppendUvarint(w.b, n) }

func (w *wireWriter) str(s string) {
	w.uvarint(uint64(len(s)))
	w.b = append(w.b, s...)
}

// value appends v. A value of a type JSON does not decode to (a typed
// slice, a struct) goes as JSON carries it (schema.Normalize: numbers as
// json.Number), which prints the same.
func (w *wireWriter) value(v any) error {
	if w.max > 0 && len(w.b) > w.max {
		return errTooMuch
	}
	switch t := v.(type) {
	case nil:
		w.b = append(w.b, tagNil)
	case bool:
		tag := tagFalse
		if t {
			tag = tagTrue
		}
		w.b = append(w.b, tag)
	case string:
		w.b = append(w.b, tagString)
		w.str(t)
	case int:
		w.b = binary.AppendVarint(append(w.b, tagInt), int64(t))
	case int64:
		w.b = binary.AppendVarint(append(w.b, tagInt64), t)
	case uint64:
		w.b = binary.AppendUvarint(append(w.b, tagUint64), t)
	case float64:
		if t == math.Trunc(t) && math.Abs(t) <= 1<<53 && (t != 0 || !math.Signbit(t)) {
			// A whole number is an integer to the template: a step's
			// inputs reach it through JSON, which decodes every number as
			// a float64, and 1000000 printed as 1e+06, refused printf's %d
			// and could not be ranged over (found trying capflow as a new
			// user).
			w.b = binary.AppendVarint(append(w.b, tagInt64), int64(t))
			break
		}
		w.b = binary.LittleEndian.AppendUint64(append(w.b, tagFloat), math.Float64bits(t))
	case json.Number:
		w.b = append(w.b, tagNumber)
		w.str(string(t))
	case map[string]any:
		w.b = append(w.b, tagMap)
		w.uvarint(uint64(len(t)))
		for k, x := range t {
			w.str(k)
			if err := w.value(x); err != nil {
				return err
			}
		}
	case []any:
		w.b = append(w.b, tagList)
		w.uvarint(uint64(len(t)))
		for _, x := range t {
			if err := w.value(x); err != nil {
				return err
			}
		}
	default:
		// Normalized, a value is written once more, never again.
		n := schema.Normalize(v)
		if !schema.JSONType(n) {
			return errUnsupported
		}
		return w.value(n)
	}
	return nil
}

// wireReader reads an encoding; a malformed one is an error, never a
// panic or an allocation past what the bytes hold.
type wireReader struct {
	b   []byte
	err error
}

var errMalformed = errors.New("malformed message")

func (r *wireReader) fail() { r.err, r.b = errMalformed, nil }

func (r *wireReader) uvarint() uint64 { return readVarint(r, binary.Uvarint) }

func (r *wireReader) varint() int64 { return readVarint(r, binary.Varint) }

// readVarint takes a varint that decode reads off the front of r.
func readVarint[T int64 | uint64](r *wireReader, decode func([]byte) (T, int)) T {
	n, k := decode(r.b)
	if k <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[k:]
	return n
}

func (r *wireReader) str() string {
	n := r.count()
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// count reads a length: a string's bytes, or a map's or list's entries,
// each a byte at least; never more than the bytes left.
func (r *wireReader) count() int {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail()
		return 0
	}
	return int(n)
}

func (r *wireReader) value() any {
	if len(r.b) == 0 {
		r.fail()
		return nil
	}
	tag := r.b[0]
	r.b = r.b[1:]
	switch tag {
	case tagNil:
		return nil
	case tagFalse, tagTrue:
		return tag == tagTrue
	case tagString:
		return r.str()
	case tagInt:
		return int(r.varint())
	case tagInt64:
		return r.varint()
	case tagUint64:
		return r.uvarint()
	case tagFloat:
		if len(r.b) < 8 {
			r.fail()
			return nil
		}
		f := math.Float64frombits(binary.LittleEndian.Uint64(r.b))
		r.b = r.b[8:]
		return f
	case tagNumber:
		return json.Number(r.str())
	case tagMap:
		n := r.count()
		m := make(map[string]any, n)
		for range n {
			k := r.str()
			m[k] = r.value()
		}
		return m
	case tagList:
		n := r.count()
		l := make([]any, n)
		for i := range l {
			l[i] = r.value()
		}
		return l
	}
	r.fail()
	return nil
}

// The answer: 0 and the text, or 1, the error's code and its words.

func encodeAnswer(text string, err error) []byte {
	w := wireWriter{b: make([]byte, 0, len(text)+16)}
	if err != nil {
		w.b = append(w.b, 1)
		w.str(string(caperr.CodeOf(err)))
		w.str(err.Error())
		return w.b
	}
	w.b = append(w.b, 0)
	w.str(text)
	return w.b
}

func decodeAnswer(b []byte) (string, error) {
	if len(b) == 0 {
		return "", errMalformed
	}
	r := wireReader{b: b[1:]}
	switch b[0] {
	case 0:
		text := r.str()
		if r.err == nil && len(r.b) == 0 {
			return text, nil
		}
	case 1:
		code, msg := r.str(), r.str()
		if r.err == nil && len(r.b) == 0 {
			return "", caperr.New(caperr.Code(code), "%s", msg)
		}
	}
	return "", errMalformed
}
