package skills

import (
	"bytes"
	"encoding/json"
	"path"
	"sort"
	"strings"
	"unicode/utf8"
)

// Scheme is the URI scheme skills are served under.
const Scheme = "skill"

// SkillFile is the file name that makes a folder a skill.
const SkillFile = "SKILL.md"

// DirectoryMIMEType marks directory resources in resources/directory/read.
const DirectoryMIMEType = "inode/directory"

// Skill is one loaded skill. A Skill is immutable once loaded; slices
// returned by Set methods are copies.
type Skill struct {
	// Path is the skill path: the folder's path relative to the skills
	// folder, '/'-separated; its last segment is Name.
	Path string
	// URI is the URI of the skill's SKILL.md, skill://<Path>/SKILL.md.
	URI string
	// Name and Description are the frontmatter fields of the same names.
	Name        string
	Description string
	// Metadata holds the recognised frontmatter metadata.
	Metadata Metadata
	// Frontmatter is the SKILL.md frontmatter rendered verbatim as a JSON object.
	Frontmatter json.RawMessage
	// Files lists every served file of the skill, SKILL.md first, then by
	// path; files of nested skills are included, as SEP-2640 requires.
	Files []File

	dirs []string // directories under the skill folder, relative, sorted
}

// File is one served file of a skill.
type File struct {
	// Path is relative to the skill folder, '/'-separated ("SKILL.md",
	// "references/forms.md").
	Path string
	// URI is skill://<skill path>/<Path>.
	URI string
	// MIMEType is chosen by extension; see mimeTypeFor.
	MIMEType string
	// Size is the number of bytes served.
	Size int64
	// Digest is "sha256:" and the lowercase hex SHA-256 of the bytes served.
	Digest string
	// Text reports whether the file is served as text (valid UTF-8 with no
	// NUL byte) rather than as a base64 blob. Either way the bytes a client
	// decodes are exactly the bytes Digest covers.
	Text bool

	body *body
}

// body holds a file's bytes once, as the string served for text or the
// slice served for blobs.
type body struct {
	text string
	blob []byte
}

// Set is the immutable collection of public, accepted skills that a
// server serves. The zero value and nil are empty sets. A Set is safe for
// concurrent use.
type Set struct {
	skills []*Skill            // sorted by URI
	byURI  map[string]*Skill   // SKILL.md URI → skill
	files  map[string]*served  // file URI → file
	dirs   map[string][]dirent // directory URI → direct children, sorted by URI
}

// served is a file as the server holds it: the innermost skill that owns it
// supplies its resource metadata.
type served struct {
	file  File
	owner *Skill
}

// dirent is one child of a directory resource.
type dirent struct {
	uri   string
	name  string
	isDir bool
}

// Len returns the number of skills in the set.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.skills)
}

// Skills returns the skills sorted by URI.
func (s *Set) Skills() []Skill {
	if s == nil {
		return nil
	}
	out := make([]Skill, len(s.skills))
	for i, sk := range s.skills {
		out[i] = sk.clone()
	}
	return out
}

// URIs returns the SKILL.md URIs of the skills, sorted; this is the
// capability manifest's skillUris.
func (s *Set) URIs() []string {
	if s == nil {
		return []string{}
	}
	out := make([]string, len(s.skills))
	for i, sk := range s.skills {
		out[i] = sk.URI
	}
	return out
}

// Lookup returns the skill whose SKILL.md URI is uri.
func (s *Set) Lookup(uri string) (Skill, bool) {
	if s == nil {
		return Skill{}, false
	}
	sk, ok := s.byURI[uri]
	if !ok {
		return Skill{}, false
	}
	return sk.clone(), true
}

// fileURIs returns the URIs of every served file, sorted.
func (s *Set) fileURIs() []string {
	uris := make([]string, 0, len(s.files))
	for u := range s.files {
		uris = append(uris, u)
	}
	sort.Strings(uris)
	return uris
}

func (sk *Skill) clone() Skill {
	c := *sk
	c.Frontmatter = bytes.Clone(sk.Frontmatter)
	c.Files = append([]File(nil), sk.Files...)
	c.dirs = nil
	return c
}

// newSet indexes the public skills. Every skill passed in has been
// accepted, and so has every skill nested in it.
func newSet(public []*Skill) *Set {
	s := &Set{
		byURI: make(map[string]*Skill, len(public)),
		files: make(map[string]*served),
		dirs:  make(map[string][]dirent),
	}
	s.skills = append(s.skills, public...)
	sort.Slice(s.skills, func(i, j int) bool { return s.skills[i].URI < s.skills[j].URI })
	// Visit enclosing skills before nested ones so the innermost skill
	// ends up owning each shared file.
	byDepth := append([]*Skill(nil), public...)
	sort.SliceStable(byDepth, func(i, j int) bool { return byDepth[i].Path < byDepth[j].Path })
	children := make(map[string]map[string]dirent)
	addChild := func(dirURI string, d dirent) {
		m := children[dirURI]
		if m == nil {
			m = make(map[string]dirent)
			children[dirURI] = m
		}
		m[d.uri] = d
	}
	for _, sk := range byDepth {
		s.byURI[sk.URI] = sk
		root := Scheme + "://" + sk.Path
		if _, ok := children[root]; !ok {
			children[root] = map[string]dirent{}
		}
		// Prefix directories lead to the skill root.
		segs := strings.Split(sk.Path, "/")
		for i := 1; i < len(segs); i++ {
			parent := Scheme + "://" + strings.Join(segs[:i], "/")
			addChild(parent, dirent{uri: parent + "/" + segs[i], name: segs[i], isDir: true})
		}
		for _, d := range sk.dirs {
			if _, ok := children[root+"/"+d]; !ok {
				children[root+"/"+d] = map[string]dirent{}
			}
			addChild(dirURI(root, path.Dir(d)), dirent{uri: root + "/" + d, name: path.Base(d), isDir: true})
		}
		for _, f := range sk.Files {
			s.files[f.URI] = &served{file: f, owner: sk}
			addChild(dirURI(root, path.Dir(f.Path)), dirent{uri: f.URI, name: path.Base(f.Path)})
		}
	}
	for dir, m := range children {
		list := make([]dirent, 0, len(m))
		for _, d := range m {
			list = append(list, d)
		}
		sort.Slice(list, func(i, j int) bool { return list[i].uri < list[j].uri })
		s.dirs[dir] = list
	}
	return s
}

func dirURI(root, rel string) string {
	if rel == "." {
		return root
	}
	return root + "/" + rel
}

// isText reports whether b is served as text: non-empty, valid UTF-8 and
// free of NUL bytes. Empty files are served as an empty blob, because an
// empty text field is omitted on the wire.
func isText(b []byte) bool {
	return len(b) > 0 && utf8.Valid(b) && bytes.IndexByte(b, 0) < 0
}

// mimeTypes maps lowercase extensions to MIME types. It is fixed here,
// not read from the host's mime database, so resource metadata does not
// depend on the machine the server runs on.
var mimeTypes = map[string]string{
	".md":       "text/markdown",
	".markdown": "text/markdown",
	".txt":      "text/plain",
	".csv":      "text/csv",
	".html":     "text/html",
	".htm":      "text/html",
	".css":      "text/css",
	".js":       "text/javascript",
	".mjs":      "text/javascript",
	".ts":       "text/x-typescript",
	".py":       "text/x-python",
	".sh":       "text/x-shellscript",
	".bash":     "text/x-shellscript",
	".go":       "text/x-go",
	".rb":       "text/x-ruby",
	".rs":       "text/x-rust",
	".java":     "text/x-java",
	".sql":      "application/sql",
	".json":     "application/json",
	".yaml":     "application/yaml",
	".yml":      "application/yaml",
	".toml":     "application/toml",
	".xml":      "application/xml",
	".svg":      "image/svg+xml",
	".png":      "image/png",
	".jpg":      "image/jpeg",
	".jpeg":     "image/jpeg",
	".gif":      "image/gif",
	".webp":     "image/webp",
	".pdf":      "application/pdf",
	".zip":      "application/zip",
}

// mimeTypeFor picks a MIME type by extension, falling back to text/plain
// for text and application/octet-stream for binary content.
func mimeTypeFor(name string, text bool) string {
	if t, ok := mimeTypes[strings.ToLower(path.Ext(name))]; ok {
		return t
	}
	if text {
		return "text/plain"
	}
	return "application/octet-stream"
}
