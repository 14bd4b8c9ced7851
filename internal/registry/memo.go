package registry

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// Memo is a registry kept between loads (Options.Memo). A registry it
// answers is shared: callers read it, never change it.
//
// Once a load finds the tools' files as the memo's registry found them,
// the memo watches the folders its discovery read (where the system
// can: watch_linux.go). From then on a load answers the registry without
// looking at any manifest until something changed in one of those
// folders, or a configured folder's path names another folder than it
// did (one stat each): a worker's Resolve no longer stats every tool.yaml
// of the project for every run. The watch is exact, not a time window:
// the kernel queues a change when the writer's call returns, and a load
// reads that queue before it answers.
type Memo struct {
	mu  sync.Mutex
	fp  string
	r   *Registry
	key memoKey  // the options w watches for
	w   *watcher // nil: every load discovers the files
	// pins are the folders whose path must keep naming the same folder.
	pins map[string]identity
	// unwatchable is a fingerprint found not to be watchable: its loads
	// discover the files, without trying again. retry is when a watch the
	// system refused (its limits) is tried again; arming, that a load is
	// starting one (the others do not).
	unwatchable string
	retry       time.Time
	arming      bool
}

func (m *Memo) get(fp string) *Registry {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fp == fp {
		return m.r
	}
	return nil
}

func (m *Memo) put(fp string, r *Registry) {
	if m == nil || len(r.Warnings) > 0 {
		return // a registry with warnings is told again on the next load
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if fp != m.fp {
		m.stopWatching() // a load that began before the watch ends after it
	}
	m.fp, m.r = fp, r
}

// stopWatching ends the watch (m.mu held).
func (m *Memo) stopWatching() {
	if m.w != nil {
		m.w.close()
		m.w, m.pins = nil, nil
	}
}

// unchanged is the memo's registry when it is watched for opts and
// nothing in the watched folders changed since; a change ends the watch.
func (m *Memo) unchanged(opts Options) *Registry {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.w == nil || !m.key.matches(opts) {
		return nil
	}
	if m.w.changed() || !samePins(m.pins) {
		m.stopWatching()
		return nil
	}
	return m.r
}

// watch starts watching what a discovery with opts read, once files
// (fingerprint fp) matched the memo's registry. The watch begins before a
// second discovery, and is kept only if that finds the same files,
// folders and paths: a change between the two is never missed.
func (m *Memo) watch(opts Options, fp string, files []found) {
	if m == nil {
		return
	}
	if !m.claim(opts, fp) {
		return
	}
	defer func() { m.mu.Lock(); m.arming = false; m.mu.Unlock() }()
	dirs, pins := watchable(opts, files), pinned(opts, files)
	if dirs == nil || pins == nil {
		m.mu.Lock()
		m.unwatchable = fp
		m.mu.Unlock()
		return
	}
	w := newWatcher(dirs)
	if w == nil {
		m.mu.Lock()
		m.retry = time.Now().Add(watchRetry)
		m.mu.Unlock()
		return
	}
	again, err := discover(opts)
	if err != nil || fingerprint(opts, again) != fp || !slices.Equal(watchedDirs(opts, again), dirs) || !samePins(pins) {
		w.close()
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fp != fp {
		w.close()
		return
	}
	m.stopWatching()
	m.w, m.key, m.pins = w, keyOf(opts), pins
}

// claim reports whether this load starts the watch for fp (then arming
// is set): none watches for opts yet, fp was not found unwatchable, no
// other load is starting one, and no refusal asks to wait.
func (m *Memo) claim(opts Options, fp string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if (m.w != nil && m.key.matches(opts)) || m.unwatchable == fp || m.arming || time.Now().Before(m.retry) {
		return false
	}
	m.arming = true
	return true
}

// watchable are the folders to watch for files, or nil when a change
// could escape them: a manifest that is a link or has another name, a
// built-in kit whose copy could not be written (its fix is outside),
// too many folders, or one on a file system another host may change.
func watchable(opts Options, files []found) []string {
	if len(files) > maxWatched {
		return nil
	}
	for _, f := range files {
		if f.kind == "unwritable-kit" || (f.fsys == nil && f.stamp != "" && !singlyNamed(f.name)) {
			return nil
		}
	}
	dirs := watchedDirs(opts, files)
	for _, d := range dirs {
		if !localFS(d) {
			return nil
		}
	}
	return dirs
}

// pinned are the folders whose path must keep naming the same folder:
// the project's root, every tools and kits folder (or the nearest one
// above that exists), every kit's folder (a link to a release, switched)
// and built-in kit's copy; nil when one cannot be told (a kit's folder
// that is a link to nothing yet).
func pinned(opts Options, files []found) map[string]identity {
	paths := append(append([]string{existing(opts.Root)}, configured(opts)...), kitFolders(opts)...)
	for _, f := range files {
		if f.cached {
			paths = append(paths, filepath.Dir(f.name))
		}
	}
	pins := map[string]identity{}
	for _, p := range paths {
		id, ok := identityOf(p)
		if !ok {
			return nil
		}
		pins[p] = id
	}
	return pins
}

// configured are the tools and kits folders, each where it would appear
// when it does not exist yet.
func configured(opts Options) []string {
	var out []string
	for _, d := range append(slices.Clone(opts.ToolsDirs), opts.KitsDirs...) {
		out = append(out, existing(abs(opts.Root, d)))
	}
	return out
}

// kitFolders are the folders an active kit may be in, where there is
// anything at them (a link to nothing yet too).
func kitFolders(opts Options) []string {
	var out []string
	for _, kd := range opts.KitsDirs {
		for _, id := range opts.ActiveKits {
			p := filepath.Join(abs(opts.Root, kd), id)
			if _, err := os.Lstat(p); err == nil {
				out = append(out, p)
			}
		}
	}
	return out
}

// samePins reports whether every pinned path names the folder it did.
func samePins(pins map[string]identity) bool {
	for p, id := range pins {
		if now, ok := identityOf(p); !ok || now != id {
			return false
		}
	}
	return true
}

// memoKey is what of Options decides what a load finds.
type memoKey struct {
	root, stateDir, kitCache                        string
	kitsDirs, toolsDirs, activeKits, order, protect []string
}

func keyOf(o Options) memoKey {
	return memoKey{o.Root, o.StateDir, o.KitCache, slices.Clone(o.KitsDirs), slices.Clone(o.ToolsDirs), slices.Clone(o.ActiveKits), slices.Clone(o.Order), slices.Clone(o.Protected)}
}

// matches reports whether o is the options k was taken from.
func (k memoKey) matches(o Options) bool {
	return k.root == o.Root && k.stateDir == o.StateDir && k.kitCache == o.KitCache && slices.Equal(k.kitsDirs, o.KitsDirs) &&
		slices.Equal(k.toolsDirs, o.ToolsDirs) && slices.Equal(k.activeKits, o.ActiveKits) && slices.Equal(k.order, o.Order) && slices.Equal(k.protect, o.Protected)
}

// watchRetry is how long a memo the system refused a watch (its inotify
// limits, this process's) waits before it asks again.
const watchRetry = time.Minute

// maxWatched bounds the folders one memo watches (each is a kernel
// watch); a project with more discovers its files at every load.
const maxWatched = 4096

// watchedDirs are the folders whose change may change what discover
// finds with opts: every tools and kits folder (or, where one is
// missing, the nearest folder above it that exists, where it would
// appear), each kit's folder, each tool's folder (its tool.yaml), and
// every folder of a built-in kit put on disk (kitcache rewrites an
// altered copy when it next looks).
func watchedDirs(opts Options, files []found) []string {
	set := map[string]bool{}
	add := func(dir string) { set[existing(dir)] = true }
	for _, d := range append(configured(opts), kitFolders(opts)...) {
		add(d)
	}
	for _, d := range toolFolders(opts, files) {
		set[d] = true
	}
	for _, f := range files {
		if f.fsys != nil || f.name == "" {
			continue
		}
		add(filepath.Dir(f.name))
		if f.cached {
			_ = filepath.WalkDir(filepath.Dir(f.name), func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					set[p] = true
				}
				return nil
			})
		}
	}
	if len(set) > maxWatched {
		return nil
	}
	return slices.Sorted(maps.Keys(set))
}

// toolFolders are the folders a tool.yaml may appear in: each one
// discovery listed in a tools folder or a kit's on disk, with a manifest
// or not yet.
func toolFolders(opts Options, files []found) []string {
	var listed, out []string
	for _, td := range opts.ToolsDirs {
		listed = append(listed, abs(opts.Root, td))
	}
	for _, f := range files {
		if f.kind == "kit" && f.fsys == nil {
			listed = append(listed, filepath.Dir(f.name))
		}
	}
	for _, dir := range listed {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if toolFolder(e) {
				out = append(out, filepath.Join(dir, e.Name()))
			}
		}
	}
	return out
}

// existing is dir, or the nearest folder above it that exists.
func existing(dir string) string {
	for {
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			return dir
		}
		dir = up
	}
}
