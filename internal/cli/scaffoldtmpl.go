package cli

import (
	"bytes"
	"embed"
	"encoding/json"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/goccy/go-yaml"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/schema"
)

// A new tool is rendered from templates: the project's templates/tool/
// when it has that folder (`tools scaffold --write-templates` puts the
// built-in ones there to edit), else the built-in ones. A file named
// *.tmpl is a text/template (the suffix dropped); any other is copied.

//go:embed templates/tool
var builtinTemplates embed.FS

// TemplatesDir is where a project keeps its own tool templates.
const TemplatesDir = "templates/tool"

// toolTemplates are the templates a scaffold uses, and where they are.
func toolTemplates(root string) (fs.FS, string) {
	dir := filepath.Join(root, filepath.FromSlash(TemplatesDir))
	if st, err := os.Stat(dir); err == nil && st.IsDir() {
		// Read beneath the folder: a link in it that leaves it (a cloned
		// project's templates/tool/x -> ~/.ssh/id_rsa) is refused, not
		// copied into the new tool. Open for the command's life.
		if r, err := os.OpenRoot(dir); err == nil {
			return r.FS(), dir
		}
	}
	sub, _ := fs.Sub(builtinTemplates, TemplatesDir)
	return sub, "built in"
}

// scaffoldData is what a template sees.
type scaffoldData struct {
	Name, Capability, Description string
	InputSchema, OutputSchema     map[string]any
	// Entrypoint is command, http or builtin; URL and Builtin go with it.
	Entrypoint, URL, Builtin string
	// Sample is data the output schema accepts, as JSON.
	Sample string
}

var templateFuncs = template.FuncMap{
	"json": func(v any) (string, error) { b, err := json.Marshal(v); return string(b), err },
	"yaml": func(v any) (string, error) {
		b, err := yaml.MarshalWithOptions(v, yaml.IndentSequence(true))
		return strings.TrimRight(string(b), "\n"), err
	},
	"indent": func(n int, s string) string {
		pad := strings.Repeat(" ", n)
		return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
	},
}

// renderScaffold writes every template file into folder, beneath it; it
// returns the files written.
func renderScaffold(tfs fs.FS, folder string, s scaffoldSpec) ([]string, error) {
	sample, _ := json.Marshal(schema.Sample(s.OutputSchema))
	data := scaffoldData{Name: s.Name, Capability: s.Capability, Description: s.Description,
		InputSchema: s.InputSchema, OutputSchema: s.OutputSchema, Sample: string(sample), Entrypoint: s.Entrypoint, URL: s.URL, Builtin: s.Builtin}
	if err := os.MkdirAll(folder, 0o755); err != nil {
		return nil, caperr.Wrap(caperr.InvalidInput, err, "create %s", folder)
	}
	root, err := os.OpenRoot(folder)
	if err != nil {
		return nil, caperr.Wrap(caperr.InvalidInput, err, "open %s", folder)
	}
	defer root.Close()
	var written []string
	err = fs.WalkDir(tfs, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || name == "." {
			return err
		}
		body, mode, err := renderTemplate(tfs, name, d, data)
		if err != nil || len(bytes.TrimSpace(body)) == 0 {
			return err // a template that renders to nothing is not for this entrypoint
		}
		out := strings.TrimSuffix(name, ".tmpl")
		if dir := path.Dir(out); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return err
			}
		}
		if err := root.WriteFile(out, body, mode); err != nil {
			return err
		}
		// WriteFile keeps an existing file's mode (--force): set it.
		if err := root.Chmod(out, mode); err != nil {
			return err
		}
		written = append(written, filepath.Join(folder, filepath.FromSlash(out)))
		return nil
	})
	if err != nil {
		return written, caperr.Wrap(caperr.InvalidInput, err, "render the tool templates")
	}
	return written, nil
}

// renderTemplate is one template file's content and the mode to write it
// with: executable when the template is, or starts with #!.
func renderTemplate(tfs fs.FS, name string, d fs.DirEntry, data scaffoldData) ([]byte, fs.FileMode, error) {
	raw, err := fs.ReadFile(tfs, name)
	if err != nil {
		return nil, 0, err
	}
	body := raw
	if strings.HasSuffix(name, ".tmpl") {
		t, err := template.New(name).Funcs(templateFuncs).Option("missingkey=error").Parse(string(raw))
		if err != nil {
			return nil, 0, err
		}
		var b bytes.Buffer
		if err := t.Execute(&b, data); err != nil {
			return nil, 0, err
		}
		body = b.Bytes()
	}
	mode := fs.FileMode(0o644)
	if info, err := d.Info(); err == nil && info.Mode()&0o111 != 0 || bytes.HasPrefix(body, []byte("#!")) {
		mode = 0o755
	}
	return body, mode, nil
}

// writeTemplates copies the built-in templates into the project's
// templates/tool, to edit; it refuses to overwrite one there.
func writeTemplates(root string) ([]string, error) {
	dir := filepath.Join(root, filepath.FromSlash(TemplatesDir))
	if _, err := os.Stat(dir); err == nil {
		return nil, caperr.New(caperr.InvalidInput, "%s exists already: edit it (or remove it to get the built-in templates again)", dir)
	}
	sub, _ := fs.Sub(builtinTemplates, TemplatesDir)
	if err := os.CopyFS(dir, sub); err != nil {
		return nil, caperr.Wrap(caperr.InvalidInput, err, "write %s", dir)
	}
	var out []string
	_ = fs.WalkDir(sub, ".", func(name string, d fs.DirEntry, _ error) error {
		if !d.IsDir() {
			out = append(out, filepath.Join(dir, filepath.FromSlash(name)))
			if strings.HasPrefix(path.Base(name), "run.") {
				_ = os.Chmod(out[len(out)-1], 0o755)
			}
		}
		return nil
	})
	return out, nil
}
