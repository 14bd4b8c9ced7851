// Package suggest finds "did you mean" candidates for misspelled names.
package suggest

import (
	"sort"
	"strings"
	"unicode/utf8"
)

// Bounds of a search: a word longer than maxWord bytes is no typo, and the
// first maxCandidates candidates, in the order given, are weighed. Names a tool's output chose
// can be megabytes long or number hundreds of thousands: an edit distance
// each cost 1.3 s and 0.9 GB for one step (found attacking issue 57).
const (
	maxWord       = 256
	maxCandidates = 1000
)

// Closest returns up to max candidates near word, nearest first. A
// candidate is near when its edit distance is at most a third of the
// word's length (at least 1), or when one contains the other.
func Closest(word string, candidates []string, max int) []string {
	type scored struct {
		s string
		d int
	}
	if len(word) > maxWord {
		return nil
	}
	w := strings.ToLower(word)
	limit := len(w) / 3
	if limit < 1 {
		limit = 1
	}
	var out []scored
	seen := map[string]bool{}
	for _, c := range candidates[:min(len(candidates), maxCandidates)] {
		if seen[c] || c == word {
			continue
		}
		seen[c] = true
		lc := strings.ToLower(c)
		// One within the other is as far as their lengths are apart; words
		// whose lengths are further apart than limit are further than it.
		apart := lengthsApart(lc, w)
		switch {
		case len(w) >= 3 && (strings.Contains(lc, w) || strings.Contains(w, lc)):
			out = append(out, scored{c, apart})
		case apart <= limit:
			if d := Distance(w, lc); d <= limit {
				out = append(out, scored{c, d})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].d != out[j].d {
			return out[i].d < out[j].d
		}
		return out[i].s < out[j].s
	})
	var res []string
	for i := 0; i < len(out) && i < max; i++ {
		res = append(res, out[i].s)
	}
	return res
}

// Typo is the candidate word is a misspelling of: the nearest within
// Closest's edit distance, not one that merely holds word or is held by
// it (size in size_bytes may be another thing); "" when none is.
func Typo(word string, candidates []string) string {
	near := Closest(word, candidates, 1)
	limit := max(1, len(word)/3)
	// Lengths further apart than limit are further apart than it (a
	// candidate holding the word may be long: no table for it).
	if len(near) == 0 || lengthsApart(near[0], word) > limit || Distance(word, near[0]) > limit {
		return ""
	}
	return near[0]
}

// lengthsApart is how many characters a and b differ in length: the least
// edit distance between them.
func lengthsApart(a, b string) int {
	n := utf8.RuneCountInString(a) - utf8.RuneCountInString(b)
	return max(n, -n)
}

// Phrase renders ` (did you mean "x"?)` or "" when nothing is close:
// what capflow calls a word other workflow tools use (depends_on: needs),
// else a near spelling.
func Phrase(word string, candidates []string) string {
	c := synonymsOf(word, candidates)
	if len(c) == 0 {
		c = Closest(word, candidates, 1)
	}
	if len(c) == 0 {
		return ""
	}
	return ` (did you mean "` + c[0] + `"?)`
}

// synonyms are field names of other workflow tools (GitHub Actions, Argo,
// Dagu, Airflow, Ansible) and capflow's, suggested only where capflow's
// name is a candidate.
var synonyms = map[string]string{
	"depends_on": "needs", "dependson": "needs", "depends": "needs", "dependencies": "needs", "after": "needs", "requires": "needs",
	"if": "when", "condition": "when",
	"args": "with", "arguments": "with", "params": "with", "parameters": "with",
	"uses": "capability", "action": "capability", "task": "capability",
	"foreach": "for_each", "loop": "for_each", "with_items": "for_each", "items": "for_each",
	"retries": "retry", "continue_on_error": "on_failure", "ignore_errors": "on_failure",
	"parallelism": "max_parallel", "concurrency": "max_parallel",
}

func synonymsOf(word string, candidates []string) []string {
	want, ok := synonyms[strings.ToLower(strings.ReplaceAll(word, "-", "_"))]
	if !ok {
		return nil
	}
	for _, c := range candidates {
		if c == want {
			return []string{c}
		}
	}
	return nil
}

// Distance is the optimal-string-alignment edit distance between a and
// b: insertions, deletions, substitutions and adjacent transpositions. It
// keeps three rows of the table, not the whole of it.
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2, prev, cur := make([]int, len(rb)+1), make([]int, len(rb)+1), make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
