// Package router turns request text into a plan: deterministic rules
// first (router.yaml), an optional OpenAI-compatible LLM as fallback
// (docs/router.md).
package router

import (
	"net/url"
	"regexp"
	"strings"
)

// Entities are the values extracted from a request.
type Entities struct {
	Text   string   `json:"text"` // normalised request
	URLs   []string `json:"urls,omitempty"`
	Files  []string `json:"files,omitempty"` // file names and paths with an extension
	Folder string   `json:"folder,omitempty"`
	Dir    string   `json:"dir,omitempty"`  // a local directory mentioned ("in videos/")
	Mode   string   `json:"mode,omitempty"` // "all" or "selected"
}

// URL is the first URL, or "".
func (e Entities) URL() string {
	if len(e.URLs) > 0 {
		return e.URLs[0]
	}
	return ""
}

// File is the first file, or "".
func (e Entities) File() string {
	if len(e.Files) > 0 {
		return e.Files[0]
	}
	return ""
}

var (
	urlRe = regexp.MustCompile(`https?://[^\s"'<>]+`)
	// fileRe leaves the delimiter after a name unconsumed (RE2 has no
	// lookahead): the caller checks it, so "a.webm b.webm" yields both.
	fileRe   = regexp.MustCompile(`(?:^|[\s"'(])((?:[\p{L}\p{N}_.\-~]+/)*[\p{L}\p{N}_.\-~]*[\p{L}\p{N}_\-~]\.(?:[A-Za-z0-9]{1,5}))`)
	folderRe = regexp.MustCompile(`(?i)(?:folder|directory|папк[уаеи]|каталог|carpeta|cartella|dossier)\s+["']?([^\s"',;]+)`)
	// A folder: "./x", "../x/y" or "/x" (the last slash optional), or bare
	// components each ending in a slash ("rec/", "a/b/").
	dirRe   = regexp.MustCompile(UnicodeBoundaries(`\b(?:in|into|to|from|under|в|во|из|en|di)\s+["']?(\.{0,2}/(?:[\p{L}\p{N}_.\-]+/?)*|(?:[\p{L}\p{N}_.\-]+/)+)`))
	allRe   = regexp.MustCompile(UnicodeBoundaries(`\b(all|every|each|все|всё|всех|todos|todas|tutti|tutte)\b`))
	spaceRe = regexp.MustCompile(`\s+`)
)

// wordBoundary stands for \b: Go's \b is ASCII only, so "в" or "все"
// never sit between word boundaries. It consumes the character it finds
// (RE2 has no lookaround): fine for matching, and the values extracted
// are in groups.
const wordBoundary = `(?:^|$|[^\p{L}\p{N}_])`

// nonWord is one character that is not part of a word, of any script.
const nonWord = `[^\p{L}\p{N}_]`

// betweenBoundaries are the fillers a rule puts between two boundaries
// (`\b(list|show)\b.*\bfiles?\b`), each rewritten with the two: one
// separator may stand for both (as the zero-width \b lets it), which two
// consuming boundaries would each want for their own ("list files" did
// not match).
var betweenBoundaries = map[string]string{
	`\b.*\b`: nonWord + `(?:.*` + nonWord + `)?`, `\b.+\b`: nonWord + `(?:.*` + nonWord + `)?`,
	`\b.*?\b`: nonWord + `(?:.*?` + nonWord + `)??`, `\b.+?\b`: nonWord + `(?:.*?` + nonWord + `)??`,
}

// UnicodeBoundaries rewrites each \b of a pattern to a boundary that
// knows letters of every script (routing rules are written with \b and
// requests come in Russian as often as in English).
func UnicodeBoundaries(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if filler := between(p[i:]); filler != "" {
			b.WriteString(betweenBoundaries[filler])
			i += len(filler) - 1
			continue
		}
		if p[i] == '\\' && i+1 < len(p) {
			if p[i+1] == 'b' {
				b.WriteString(wordBoundary)
			} else {
				b.WriteString(p[i : i+2])
			}
			i++
			continue
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

// between is the filler between two boundaries that p begins with, or "".
func between(p string) string {
	for f := range betweenBoundaries {
		if strings.HasPrefix(p, f) {
			return f
		}
	}
	return ""
}

// Normalize lowercases, trims and collapses white space; URLs keep their
// original case (they are case-sensitive) and are extracted first.
func Normalize(text string) (string, []string) {
	urls := urlRe.FindAllString(text, -1)
	for i, u := range urls {
		urls[i] = strings.TrimRight(u, ".,;:!?)")
	}
	// Each URL leaves a "url:<host>" token, so rules can match hosts
	// (youtu.be, disk.yandex.ru) without seeing paths or queries.
	stripped := urlRe.ReplaceAllStringFunc(text, func(u string) string {
		if parsed, err := url.Parse(strings.TrimRight(u, ".,;:!?)")); err == nil && parsed.Host != "" {
			return " url:" + strings.TrimPrefix(strings.ToLower(parsed.Host), "www.") + " "
		}
		return " url "
	})
	norm := strings.TrimSpace(spaceRe.ReplaceAllString(strings.ToLower(stripped), " "))
	return norm, urls
}

// Extract finds URLs, file names, folder, directory and mode.
func Extract(text string) Entities {
	norm, urls := Normalize(text)
	e := Entities{Text: norm, URLs: urls}
	// File names keep their case: search the text with URLs removed.
	plain := urlRe.ReplaceAllString(text, " ")
	seen := map[string]bool{}
	for _, m := range fileRe.FindAllStringSubmatchIndex(plain, -1) {
		f := plain[m[2]:m[3]]
		if end := m[3]; end < len(plain) && !strings.ContainsRune(" \t\n\r\"',;:)!?", rune(plain[end])) {
			continue
		}
		if !seen[f] && !strings.HasSuffix(f, ".") {
			seen[f] = true
			e.Files = append(e.Files, f)
		}
	}
	if m := folderRe.FindStringSubmatch(plain); m != nil {
		e.Folder = m[1]
	}
	if m := dirRe.FindStringSubmatch(plain); m != nil {
		e.Dir = strings.TrimSuffix(m[1], "/")
		if e.Dir == "" {
			e.Dir = "."
		}
	}
	switch {
	case allRe.MatchString(norm):
		e.Mode = "all"
	case len(e.Files) > 0:
		e.Mode = "selected"
	}
	return e
}
