package skills

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Bounds on what is served. A skill over a bound is refused with a named
// reason; the others still load. They are tighter than the SEP-2640 host
// limits (512 files, 16 MiB), so every conforming host accepts every skill
// this server serves.
const (
	// MaxSkillMDBytes bounds a SKILL.md file.
	MaxSkillMDBytes = 64 << 10
	// MaxFilesPerSkill bounds the files of a skill, SKILL.md and nested
	// skills' files included.
	MaxFilesPerSkill = 32
	// MaxSkillBytes bounds the total size of a skill's files.
	MaxSkillBytes = 1 << 20
	// MaxSkills bounds the skill folders loaded; those past it, in path
	// order, are refused. Private skills count.
	MaxSkills = 256
	// MaxWalkEntries bounds the entries Load will look at. A folder with
	// more is not a skills folder (a mistaken --skills /, say), and Load
	// fails rather than walk it.
	MaxWalkEntries = 1 << 16
	// MaxURILength bounds a served URI.
	MaxURILength = 1024
)

// prefixSegmentRe is the rule for skill path segments before the skill
// name. The first one sits in the URI authority, so they are kept to
// lowercase host-name characters.
var prefixSegmentRe = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// fileSegmentRe is the rule for each segment of a file path inside a
// skill: URI-safe characters only, so the URI is the path byte for byte
// with no percent-encoding for a client to get wrong.
var fileSegmentRe = regexp.MustCompile(`^[A-Za-z0-9_~+@=,-][A-Za-z0-9._~+@=,-]{0,254}$`)

type entryKind int

const (
	kindDir entryKind = iota
	kindFile
	kindSymlink
	kindOther
	kindError
)

// entry is one thing the walk saw under the skills folder.
type entry struct {
	path string // relative, '/'-separated
	kind entryKind
	size int64
	err  error
}

// loaded is the outcome of loading a folder, before private skills are
// filtered out. Load serves from it; CheckReport reports all of it.
type loaded struct {
	skills   []*Skill // accepted (public and private), sorted by path
	refusals []Refusal
}

// Load loads every skill folder under dir and returns the public, accepted
// skills as a Set, plus the refusals. Each refusal is also logged as a
// warning naming the skill and the rule. Private skills are dropped here,
// before anything can register them.
//
// The error is non-nil only when dir itself cannot be used: it does not
// exist, is not a directory, cannot be read, or holds more than
// MaxWalkEntries entries (ErrTreeTooLarge). A skill that breaks a rule is
// a Refusal, never an error. dir itself may be a symbolic link; nothing
// under it is followed. A nil logger discards logs.
func Load(dir string, logger *slog.Logger) (*Set, []Refusal, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	l, err := load(dir)
	if err != nil {
		return nil, nil, err
	}
	var public []*Skill
	for _, sk := range l.skills {
		if sk.Metadata.Private {
			logger.Info("skill is private; not served", "skill", sk.Path)
			continue
		}
		public = append(public, sk)
	}
	for _, r := range l.refusals {
		logger.Warn("skill refused", "skill", r.Skill, "rule", r.Rule, "detail", r.Detail)
	}
	set := newSet(public)
	logger.Info("skills loaded", "dir", dir, "served", set.Len(),
		"private", len(l.skills)-len(public), "refused", len(l.refusals))
	return set, l.refusals, nil
}

// load walks dir and judges every skill folder in it.
func load(dir string) (*loaded, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open skills folder: %w", err)
	}
	defer root.Close()
	entries, err := walk(root, MaxWalkEntries)
	if err != nil {
		return nil, fmt.Errorf("read skills folder %s: %w", dir, err)
	}
	index := make(map[string]int, len(entries))
	for i, e := range entries {
		index[e.path] = i
	}

	var out loaded
	var skillPaths []string
	for _, e := range entries {
		if path.Base(e.path) != SkillFile || e.kind == kindDir {
			continue
		}
		sp := path.Dir(e.path)
		if sp == "." {
			out.refusals = append(out.refusals, *refusalf(".", RulePath,
				"SKILL.md sits at the top of the skills folder; put each skill in a folder named after it"))
			continue
		}
		skillPaths = append(skillPaths, sp)
	}
	sort.Strings(skillPaths)
	isSkill := make(map[string]bool, len(skillPaths))
	for _, sp := range skillPaths {
		isSkill[sp] = true
	}

	// Symbolic links and unreadable entries outside every skill are
	// reported too: a linked-in skill folder silently missing would be
	// worse than a refusal naming the link.
	for _, e := range entries {
		if (e.kind == kindSymlink || e.kind == kindError) && enclosingSkill(e.path, isSkill) == "" {
			out.refusals = append(out.refusals, *entryRefusal(e.path, e, e.path))
		}
	}

	reader := &fileReader{root: root, cache: make(map[string]*readResult)}
	refused := make(map[string]*Refusal)
	private := make(map[string]bool)
	accepted := make(map[string]*Skill)
	for i, sp := range skillPaths {
		if i >= MaxSkills {
			refused[sp] = refusalf(sp, RuleTooManySkills,
				"the folder holds %d skills; only the first %d in path order are loaded", len(skillPaths), MaxSkills)
			continue
		}
		start := index[sp] + 1
		end := start
		for end < len(entries) && strings.HasPrefix(entries[end].path, sp+"/") {
			end++
		}
		sk, r := judge(sp, entries[start:end], reader)
		if r != nil {
			refused[sp] = r
			continue
		}
		accepted[sp] = sk
		private[sp] = sk.Metadata.Private
	}

	// A skill's resources include its nested skills' files, so a nested
	// refusal or a nested private skill refuses every public skill around it.
	for _, sp := range skillPaths {
		sk, ok := accepted[sp]
		if !ok {
			continue
		}
		// Paths sharing the prefix sp+"/" are contiguous in sorted order.
		for j := sort.SearchStrings(skillPaths, sp+"/"); j < len(skillPaths) && strings.HasPrefix(skillPaths[j], sp+"/"); j++ {
			other := skillPaths[j]
			if r := refused[other]; r != nil {
				refused[sp] = refusalf(sp, RuleNestedRefused, "nested skill %s was refused (%s); fix or remove it", other, r.Rule)
				break
			}
			if private[other] && !sk.Metadata.Private {
				refused[sp] = refusalf(sp, RuleNestedPrivate,
					"private skill %s is nested inside; its files would be served as part of this skill, so move it out or mark this skill private", other)
				break
			}
		}
	}
	for _, sp := range skillPaths {
		if r := refused[sp]; r != nil {
			out.refusals = append(out.refusals, *r)
		} else {
			out.skills = append(out.skills, accepted[sp])
		}
	}
	sort.SliceStable(out.refusals, func(i, j int) bool { return out.refusals[i].Skill < out.refusals[j].Skill })
	return &out, nil
}

// walk lists the folder without following symbolic links, failing with
// ErrTreeTooLarge past limit entries. Hidden entries (names starting with
// '.') are skipped with everything under them: they are editor, VCS and OS
// files (.git, .DS_Store), never skill content, and are never served.
func walk(root *os.Root, limit int) ([]entry, error) {
	var entries []entry
	err := fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if p == "." {
			return err
		}
		if strings.HasPrefix(path.Base(p), ".") {
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if len(entries) >= limit {
			return fmt.Errorf("%w: more than %d", ErrTreeTooLarge, limit)
		}
		if err != nil {
			// An unreadable directory is reported a second time; keep one entry.
			if n := len(entries); n > 0 && entries[n-1].path == p {
				entries[n-1] = entry{path: p, kind: kindError, err: err}
			} else {
				entries = append(entries, entry{path: p, kind: kindError, err: err})
			}
			return nil
		}
		e := entry{path: p}
		switch t := d.Type(); {
		case t&fs.ModeSymlink != 0:
			e.kind = kindSymlink
		case d.IsDir():
			e.kind = kindDir
		case t.IsRegular():
			e.kind = kindFile
			info, err := d.Info()
			if err != nil {
				e.kind, e.err = kindError, err
			} else {
				e.size = info.Size()
			}
		default:
			e.kind = kindOther
		}
		entries = append(entries, e)
		return nil
	})
	return entries, err
}

// enclosingSkill returns the innermost skill path that contains p, or "".
func enclosingSkill(p string, isSkill map[string]bool) string {
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if isSkill[d] {
			return d
		}
	}
	return ""
}

// entryRefusal refuses skill because of a symlink, special file or
// unreadable entry at rel (relative to the skill) or returns nil.
func entryRefusal(skill string, e entry, rel string) *Refusal {
	switch e.kind {
	case kindSymlink:
		return refusalf(skill, RuleSymlink, "%s is a symbolic link; links are never followed, copy the content in instead", rel)
	case kindOther:
		return refusalf(skill, RuleNotRegular, "%s is not a regular file or directory", rel)
	case kindError:
		return refusalf(skill, RuleUnreadable, "%s cannot be read: %v", rel, e.err)
	}
	return nil
}

// judge applies every rule to one skill folder. under lists the entries
// below it (its files, subdirectories and nested skills' entries).
func judge(sp string, under []entry, rd *fileReader) (*Skill, *Refusal) {
	segs := strings.Split(sp, "/")
	name := segs[len(segs)-1]
	for _, seg := range segs[:len(segs)-1] {
		if !prefixSegmentRe.MatchString(seg) {
			return nil, refusalf(sp, RulePath, "path segment %q must be 1-63 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit", seg)
		}
	}
	if why := nameProblem(name); why != "" {
		return nil, refusalf(sp, RuleName, "skill folder name %q %s", name, why)
	}

	var files []entry
	var dirs []string
	var total int64
	for _, e := range under {
		rel := strings.TrimPrefix(e.path, sp+"/")
		if r := entryRefusal(sp, e, rel); r != nil {
			return nil, r
		}
		for _, seg := range strings.Split(rel, "/") {
			if !fileSegmentRe.MatchString(seg) {
				return nil, refusalf(sp, RulePath, "%s: name %q may use only letters, digits and . _ ~ + @ = , -", rel, seg)
			}
		}
		if uri := Scheme + "://" + sp + "/" + rel; len(uri) > MaxURILength {
			return nil, refusalf(sp, RulePath, "%s: URI longer than %d bytes", rel, MaxURILength)
		}
		if e.kind == kindDir {
			dirs = append(dirs, rel)
			continue
		}
		files = append(files, e)
		total += e.size
		if rel == SkillFile && e.size > MaxSkillMDBytes {
			return nil, refusalf(sp, RuleTooLarge, "SKILL.md is %d bytes, more than %d", e.size, MaxSkillMDBytes)
		}
	}
	if len(files) > MaxFilesPerSkill {
		return nil, refusalf(sp, RuleTooManyFiles, "%d files, more than %d (nested skills' files count)", len(files), MaxFilesPerSkill)
	}
	if total > MaxSkillBytes {
		return nil, refusalf(sp, RuleTooLarge, "files total %d bytes, more than %d", total, MaxSkillBytes)
	}

	sk := &Skill{Path: sp, URI: Scheme + "://" + sp + "/" + SkillFile, dirs: dirs}
	var skillMD []byte
	for _, e := range files {
		rel := strings.TrimPrefix(e.path, sp+"/")
		res := rd.read(e)
		if res.err != nil {
			return nil, refusalf(sp, RuleUnreadable, "%s: %v", rel, res.err)
		}
		if f := res.finding; f != nil {
			return nil, refusalf(sp, f.Rule, "%s line %d carries %s", rel, f.Line, f.What)
		}
		text := isText(res.data)
		file := File{
			Path:     rel,
			URI:      Scheme + "://" + sp + "/" + rel,
			MIMEType: mimeTypeFor(rel, text),
			Size:     int64(len(res.data)),
			Digest:   res.digest,
			Text:     text,
			body:     res.body,
		}
		if rel == SkillFile {
			skillMD = res.data
			sk.Files = append([]File{file}, sk.Files...)
		} else {
			sk.Files = append(sk.Files, file)
		}
	}
	if len(skillMD) == 0 {
		return nil, refusalf(sp, RuleFrontmatter, "SKILL.md is empty; it must begin with YAML frontmatter holding name and description")
	}
	if !isText(skillMD) {
		return nil, refusalf(sp, RuleFrontmatter, "SKILL.md must be UTF-8 text without NUL bytes")
	}
	fm, err := parseFrontmatter(skillMD)
	if err != nil {
		var r *Refusal
		if !errors.As(err, &r) {
			r = refusalf("", RuleFrontmatter, "%v", err)
		}
		r.Skill = sp
		return nil, r
	}
	if f := scanValues(fm.Fields); f != nil {
		return nil, refusalf(sp, f.Rule, "SKILL.md frontmatter carries %s", f.What)
	}
	if fm.Name != name {
		return nil, refusalf(sp, RuleNameMismatch, "frontmatter name %q differs from the folder name %q; they must be equal", fm.Name, name)
	}
	sk.Name, sk.Description, sk.Metadata, sk.Frontmatter = fm.Name, fm.Description, fm.Metadata, fm.JSON
	return sk, nil
}

// fileReader reads and scans each file once, even when it belongs to a
// skill and to the skills nested around it.
type fileReader struct {
	root  *os.Root
	cache map[string]*readResult
}

type readResult struct {
	data    []byte
	body    *body
	digest  string
	finding *finding
	err     error
}

func (rd *fileReader) read(e entry) *readResult {
	if r, ok := rd.cache[e.path]; ok {
		return r
	}
	r := &readResult{}
	r.data, r.err = readExact(rd.root, e.path, e.size)
	if r.err == nil {
		sum := sha256.Sum256(r.data)
		r.digest = "sha256:" + hex.EncodeToString(sum[:])
		r.finding = scanText(r.data)
		if isText(r.data) {
			r.body = &body{text: string(r.data)}
		} else {
			r.body = &body{blob: r.data}
		}
	}
	rd.cache[e.path] = r
	return r
}

// readExact reads a regular file that the walk saw with the given size,
// and fails if it is no longer a regular file or its size changed: the
// digest must cover exactly what was checked against the bounds.
func readExact(root *os.Root, rel string, size int64) ([]byte, error) {
	name := filepath.FromSlash(rel)
	if info, err := root.Lstat(name); err != nil {
		return nil, err
	} else if !info.Mode().IsRegular() {
		return nil, errors.New("no longer a regular file")
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, errors.New("no longer a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, size+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != size {
		return nil, fmt.Errorf("changed while loading (%d bytes, expected %d)", len(data), size)
	}
	if data == nil {
		data = []byte{}
	}
	return data, nil
}
