package skills

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Protocol names of the Skills extension (SEP-2640).
const (
	// ExtensionID is the key under capabilities.extensions.
	ExtensionID = "io.modelcontextprotocol/skills"
	// MetaPrefix prefixes the _meta keys this package puts on skill resources.
	MetaPrefix = "io.modelcontextprotocol.skills/"
	// MethodList lists skills.
	MethodList = "skills/list"
	// MethodGet returns one skill's entry.
	MethodGet = "skills/get"
	// MethodDirectoryRead lists the direct children of a directory resource.
	MethodDirectoryRead = "resources/directory/read"
)

// Resource _meta keys, under MetaPrefix.
const (
	MetaVersion      = MetaPrefix + "version"
	MetaDigest       = MetaPrefix + "digest"
	MetaProvenance   = MetaPrefix + "provenance"
	MetaRequirements = MetaPrefix + "requirements"
)

// resultTypeComplete is the resultType of every result here.
const resultTypeComplete = "complete"

// cacheScopePublic: skills do not depend on who asks.
const cacheScopePublic = "public"

// ResourceRef is one file of a skill entry: its URI and the digest and
// size of the exact bytes resources/read returns for it.
type ResourceRef struct {
	URI    string `json:"uri"`
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
}

// Entry is a Skill entry of skills/list and skills/get.
type Entry struct {
	// URI is the skill's SKILL.md URI.
	URI string `json:"uri"`
	// Frontmatter is the SKILL.md frontmatter rendered verbatim as JSON.
	Frontmatter json.RawMessage `json:"frontmatter"`
	// Resources lists every file of the skill exactly once, SKILL.md
	// included. This server never serves "dynamic" skills.
	Resources []ResourceRef `json:"resources"`
}

// ListParams are the params of skills/list.
type ListParams struct {
	mcp.ParamsBase
	// Cursor is the nextCursor of the previous page, if any.
	Cursor string `json:"cursor,omitempty"`
}

// ListResult is the result of skills/list. The SDK adds neither resultType
// nor ttlMs/cacheScope to custom results, so they are fields here.
type ListResult struct {
	mcp.ResultBase
	mcp.Cacheable
	// ResultType is always "complete".
	ResultType string `json:"resultType"`
	// Skills is one page of entries in URI order; never null.
	Skills []Entry `json:"skills"`
	// NextCursor, when set, fetches the next page.
	NextCursor string `json:"nextCursor,omitempty"`
}

// GetParams are the params of skills/get.
type GetParams struct {
	mcp.ParamsBase
	// URI is the SKILL.md URI of the skill.
	URI string `json:"uri"`
}

// GetResult is the result of skills/get.
type GetResult struct {
	mcp.ResultBase
	mcp.Cacheable
	// ResultType is always "complete".
	ResultType string `json:"resultType"`
	// Skill is the entry, identical to the skill's skills/list entry.
	Skill Entry `json:"skill"`
}

// DirectoryReadParams are the params of resources/directory/read.
type DirectoryReadParams struct {
	mcp.ParamsBase
	// URI is the directory resource, without a trailing slash.
	URI string `json:"uri"`
	// Cursor is never issued by this server; any cursor is refused.
	Cursor string `json:"cursor,omitempty"`
}

// DirectoryReadResult is the result of resources/directory/read.
type DirectoryReadResult struct {
	mcp.ResultBase
	// ResultType is always "complete".
	ResultType string `json:"resultType"`
	// Resources are the direct children in URI order: files with their
	// resources/list metadata (named by base name), subdirectories with
	// mimeType inode/directory. Never null.
	Resources []*mcp.Resource `json:"resources"`
	// NextCursor is never set: every child comes in one page.
	NextCursor string `json:"nextCursor,omitempty"`
}

// RegisterOptions tune Register.
type RegisterOptions struct {
	// TTL is the ttlMs hint on skills/list, skills/get and resources/read of
	// skill files. Zero means 0: clients re-fetch rather than trust a cache.
	TTL time.Duration
	// PageSize bounds the skills in one skills/list page; 0 means all in one page.
	PageSize int
}

// ErrRegister matches the errors of Register: bad options or an SDK refusal.
var ErrRegister = errors.New("register skills")

// CapabilityValue returns the settings object to put under
// capabilities.extensions[ExtensionID]. Register always implements
// resources/directory/read, so it is {"directoryRead": true}. The server
// must also declare the resources capability (set it explicitly: when the
// set is empty, no resource is added and the SDK infers nothing).
func CapabilityValue(set *Set) map[string]any {
	_ = set // the settings do not depend on which skills are served
	return map[string]any{"directoryRead": true}
}

// Register adds every file of set as a resource of server, served from
// memory byte for byte, and the skills/list, skills/get and
// resources/directory/read methods. It does not touch server capabilities;
// see CapabilityValue. Call it before the server accepts sessions. A nil
// set registers the methods over no skills.
func Register(server *mcp.Server, set *Set, opts RegisterOptions) error {
	if server == nil {
		return fmt.Errorf("%w: server is nil", ErrRegister)
	}
	if opts.TTL < 0 {
		return fmt.Errorf("%w: TTL must not be negative, got %v", ErrRegister, opts.TTL)
	}
	if opts.PageSize < 0 {
		return fmt.Errorf("%w: PageSize must not be negative, got %d", ErrRegister, opts.PageSize)
	}
	if set == nil {
		set = newSet(nil)
	}
	h := &handler{set: set, cache: mcp.Cacheable{TTLMs: int(opts.TTL.Milliseconds()), CacheScope: cacheScopePublic}, pageSize: opts.PageSize}
	for _, uri := range set.fileURIs() {
		server.AddResource(h.resource(set.files[uri]), h.read)
	}
	if err := mcp.AddReceivingCustomMethod(server, MethodList, h.list); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrRegister, MethodList, err)
	}
	if err := mcp.AddReceivingCustomMethod(server, MethodGet, h.get); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrRegister, MethodGet, err)
	}
	if err := mcp.AddReceivingCustomMethod(server, MethodDirectoryRead, h.readDirectory); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrRegister, MethodDirectoryRead, err)
	}
	return nil
}

// handler serves one Set. Every method returns a non-nil result or a
// *jsonrpc.Error: the SDK crashes on a nil result and sends a plain error
// as code 0.
type handler struct {
	set      *Set
	cache    mcp.Cacheable
	pageSize int
}

// resource builds the resources/list entry of a file. SKILL.md carries the
// frontmatter name and description and the skill-level _meta; every file
// carries its digest.
func (h *handler) resource(sf *served) *mcp.Resource {
	f, sk := sf.file, sf.owner
	r := &mcp.Resource{
		URI:      f.URI,
		Name:     sk.Name + "/" + f.Path,
		MIMEType: f.MIMEType,
		Size:     f.Size,
		Meta:     mcp.Meta{MetaDigest: f.Digest},
	}
	if f.Path == SkillFile {
		r.Name, r.Description = sk.Name, sk.Description
		if v := sk.Metadata.Version; v != "" {
			r.Meta[MetaVersion] = v
		}
		if p := sk.Metadata.Provenance; p != nil {
			r.Meta[MetaProvenance] = *p
		}
		if req := sk.Metadata.Requirements; req != "" {
			r.Meta[MetaRequirements] = req
		}
	}
	return r
}

// read serves a file's exact bytes.
func (h *handler) read(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := ""
	if req != nil && req.Params != nil {
		uri = req.Params.URI
	}
	sf, ok := h.set.files[uri]
	if !ok {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	c := &mcp.ResourceContents{URI: uri, MIMEType: sf.file.MIMEType}
	if sf.file.Text {
		c.Text = sf.file.body.text
	} else {
		c.Blob = sf.file.body.blob
		if c.Blob == nil {
			c.Blob = []byte{} // "blob":"" for an empty file, not a missing field
		}
	}
	return &mcp.ReadResourceResult{Cacheable: h.cache, Contents: []*mcp.ResourceContents{c}}, nil
}

// entry builds the Skill entry of sk.
func entryOf(sk *Skill) Entry {
	e := Entry{URI: sk.URI, Frontmatter: sk.Frontmatter, Resources: make([]ResourceRef, len(sk.Files))}
	for i, f := range sk.Files {
		e.Resources[i] = ResourceRef{URI: f.URI, Digest: f.Digest, Size: f.Size}
	}
	return e
}

// list serves skills/list, in URI order, paged when PageSize is set.
func (h *handler) list(_ context.Context, _ *mcp.ServerSession, p *ListParams) (*ListResult, error) {
	skills := h.set.skills
	start := 0
	if p != nil && p.Cursor != "" {
		uri, err := decodeCursor(p.Cursor)
		if err == nil {
			start = sort.Search(len(skills), func(i int) bool { return skills[i].URI >= uri })
		}
		if err != nil || start == len(skills) || skills[start].URI != uri {
			return nil, invalidParams("invalid cursor for skills/list; start again without one", nil)
		}
	}
	end := len(skills)
	if h.pageSize > 0 && start+h.pageSize < end {
		end = start + h.pageSize
	}
	res := &ListResult{Cacheable: h.cache, ResultType: resultTypeComplete, Skills: make([]Entry, 0, end-start)}
	for _, sk := range skills[start:end] {
		res.Skills = append(res.Skills, entryOf(sk))
	}
	if end < len(skills) {
		res.NextCursor = encodeCursor(skills[end].URI)
	}
	return res, nil
}

// get serves skills/get. An unknown URI and a private skill's URI get the
// same -32602 error: the server does not know private skills exist.
func (h *handler) get(_ context.Context, _ *mcp.ServerSession, p *GetParams) (*GetResult, error) {
	if p == nil || p.URI == "" {
		return nil, invalidParams("skills/get requires params.uri, the URI of a skill's SKILL.md", nil)
	}
	sk, ok := h.set.byURI[p.URI]
	if !ok {
		return nil, invalidParams("No skill is served at "+p.URI, map[string]string{"uri": p.URI})
	}
	return &GetResult{Cacheable: h.cache, ResultType: resultTypeComplete, Skill: entryOf(sk)}, nil
}

// readDirectory serves resources/directory/read: the direct children of a
// skill directory, or of a prefix directory leading to skills.
func (h *handler) readDirectory(_ context.Context, _ *mcp.ServerSession, p *DirectoryReadParams) (*DirectoryReadResult, error) {
	if p == nil || p.URI == "" {
		return nil, invalidParams("resources/directory/read requires params.uri", nil)
	}
	children, ok := h.set.dirs[p.URI]
	if !ok {
		if _, isFile := h.set.files[p.URI]; isFile {
			return nil, invalidParams(p.URI+" is not a directory resource", map[string]string{"uri": p.URI})
		}
		return nil, invalidParams("No directory is served at "+p.URI, map[string]string{"uri": p.URI})
	}
	if p.Cursor != "" {
		return nil, invalidParams("invalid cursor for resources/directory/read; this server returns every child in one page", nil)
	}
	res := &DirectoryReadResult{ResultType: resultTypeComplete, Resources: make([]*mcp.Resource, 0, len(children))}
	for _, c := range children {
		if c.isDir {
			res.Resources = append(res.Resources, &mcp.Resource{URI: c.uri, Name: c.name, MIMEType: DirectoryMIMEType})
			continue
		}
		r := h.resource(h.set.files[c.uri])
		r.Name = c.name
		res.Resources = append(res.Resources, r)
	}
	return res, nil
}

// invalidParams builds a -32602 error; data, if any, is marshalled as JSON.
func invalidParams(msg string, data any) *jsonrpc.Error {
	e := &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: msg}
	if data != nil {
		if b, err := json.Marshal(data); err == nil {
			e.Data = b
		}
	}
	return e
}

const cursorPrefix = "skills.v1:"

func encodeCursor(uri string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + uri))
}

func decodeCursor(c string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", err
	}
	uri, ok := strings.CutPrefix(string(b), cursorPrefix)
	if !ok {
		return "", errors.New("not a skills/list cursor")
	}
	return uri, nil
}
