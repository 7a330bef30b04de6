package skills

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Frontmatter bounds, from the Agent Skills specification.
const (
	MaxNameLength          = 64
	MaxDescriptionLength   = 1024
	MaxCompatibilityLength = 500
)

// maxFrontmatterDepth bounds how deeply frontmatter values may nest. Real
// frontmatter is two or three levels deep; the bound keeps hostile input
// from driving deep recursion.
const maxFrontmatterDepth = 16

// maxSafeInteger is the largest integer every JSON reader (including
// JavaScript hosts, which use doubles) decodes exactly.
const maxSafeInteger = 1<<53 - 1

// Allowed keys. Anything else is refused: the set of fields a served skill
// may carry is deliberately closed, so a new field is a reviewed change.
var (
	allowedTopKeys      = []string{"name", "description", "license", "compatibility", "metadata"}
	allowedMetadataKeys = []string{"version", "provenance", "requirements", "private"}
	allowedProvenance   = []string{"source", "revision"}
)

// authorityKeys are frontmatter keys (lowercased, with '-', '_' and spaces
// removed) that ask a host for tools, permissions or code execution.
// A skill carrying one is refused with RuleGrantsAuthority rather than
// RuleUnknownKey, because the reason matters: skills grant no authority.
var authorityKeys = map[string]bool{
	"allowedtools":    true,
	"tools":           true,
	"toolpermissions": true,
	"permissions":     true,
	"hooks":           true,
	"mcpservers":      true,
	"capabilities":    true,
}

// Metadata holds the recognised fields of the frontmatter's metadata
// mapping. It is metadata only: none of it grants anything to anyone.
type Metadata struct {
	// Version is the skill's own version label, as written.
	Version string `json:"version,omitempty"`
	// Provenance says where the skill came from.
	Provenance *Provenance `json:"provenance,omitempty"`
	// Requirements is free text describing what the skill expects of its
	// environment (for example "git 2.40 or later").
	Requirements string `json:"requirements,omitempty"`
	// Private skills are never served: never listed, never readable.
	Private bool `json:"private,omitempty"`
}

// Provenance names the source a skill was taken from and its revision.
type Provenance struct {
	// Source is where the skill came from, such as a repository URL.
	Source string `json:"source"`
	// Revision identifies the version at the source, such as a commit.
	Revision string `json:"revision,omitempty"`
}

// frontmatter is a parsed and validated SKILL.md frontmatter.
type frontmatter struct {
	Name        string
	Description string
	Metadata    Metadata
	// Fields is the YAML mapping converted to JSON-compatible values.
	Fields map[string]any
	// JSON is Fields rendered once, the verbatim frontmatter of the Skill entry.
	JSON json.RawMessage
}

// parseFrontmatter extracts and validates the YAML frontmatter of a SKILL.md.
// Failures are *Refusal values with an empty Skill, for the caller to fill.
func parseFrontmatter(src []byte) (*frontmatter, error) {
	text, err := splitFrontmatter(src)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(text, &doc); err != nil {
		return nil, refusalf("", RuleFrontmatter, "SKILL.md frontmatter is not valid YAML: %v", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, refusalf("", RuleFrontmatter, "SKILL.md frontmatter must be a YAML mapping with name and description")
	}
	v, err := toJSONValue(doc.Content[0], "", 0)
	if err != nil {
		return nil, err
	}
	fields := v.(map[string]any)
	if err := checkKeys(fields); err != nil {
		return nil, err
	}
	fm := &frontmatter{Fields: fields}
	if fm.Name, err = validateName(fields["name"]); err != nil {
		return nil, err
	}
	if fm.Description, err = validateDescription(fields["description"]); err != nil {
		return nil, err
	}
	if lic, ok := fields["license"]; ok {
		if _, isStr := lic.(string); !isStr {
			return nil, refusalf("", RuleFrontmatter, "license must be a string")
		}
	}
	if c, ok := fields["compatibility"]; ok {
		s, isStr := c.(string)
		if !isStr || s == "" || utf8.RuneCountInString(s) > MaxCompatibilityLength {
			return nil, refusalf("", RuleFrontmatter, "compatibility must be a string of 1 to %d characters", MaxCompatibilityLength)
		}
	}
	if fm.Metadata, err = parseMetadata(fields["metadata"]); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(fields); err != nil {
		return nil, refusalf("", RuleFrontmatter, "frontmatter cannot be rendered as JSON: %v", err)
	}
	fm.JSON = json.RawMessage(bytes.TrimRight(buf.Bytes(), "\n"))
	return fm, nil
}

// splitFrontmatter returns the YAML text between the opening "---" line,
// which must be the very first line of the file, and the next "---" line.
func splitFrontmatter(src []byte) ([]byte, error) {
	first, rest, ok := cutLine(src)
	if !ok || strings.TrimRight(string(first), " \t") != "---" {
		return nil, refusalf("", RuleFrontmatter, "SKILL.md must begin with a '---' line opening the YAML frontmatter")
	}
	start := len(src) - len(rest)
	for pos := start; pos < len(src); {
		line, next, _ := cutLine(src[pos:])
		if strings.TrimRight(string(line), " \t") == "---" {
			return src[start:pos], nil
		}
		pos = len(src) - len(next)
	}
	return nil, refusalf("", RuleFrontmatter, "SKILL.md frontmatter has no closing '---' line")
}

// cutLine splits off the first line of b (without its "\n" or "\r\n").
// ok reports whether a line terminator was found.
func cutLine(b []byte) (line, rest []byte, ok bool) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return b, nil, false
	}
	line = b[:i]
	line = bytes.TrimSuffix(line, []byte("\r"))
	return line, b[i+1:], true
}

// toJSONValue converts a YAML node to the values encoding/json produces:
// map[string]any, []any, string, bool, int64, float64 and nil. It refuses
// what has no faithful JSON rendering or invites expansion attacks:
// anchors and aliases, non-string keys, duplicate keys, explicit tags other
// than the core ones, non-finite floats and integers beyond 2^53.
// Timestamps stay the string the author wrote, because YAML readers
// disagree on whether an unquoted date is a date or a string.
func toJSONValue(n *yaml.Node, path string, depth int) (any, error) {
	if depth > maxFrontmatterDepth {
		return nil, refusalf("", RuleFrontmatter, "frontmatter nests deeper than %d levels at %s", maxFrontmatterDepth, displayPath(path))
	}
	if n.Anchor != "" || n.Kind == yaml.AliasNode {
		return nil, refusalf("", RuleFrontmatter, "frontmatter uses a YAML anchor or alias at %s; write the value out", displayPath(path))
	}
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" || k.Anchor != "" {
				return nil, refusalf("", RuleFrontmatter, "frontmatter key at line %d under %s is not a string", k.Line, displayPath(path))
			}
			if _, dup := m[k.Value]; dup {
				return nil, refusalf("", RuleFrontmatter, "frontmatter key %q appears twice under %s", k.Value, displayPath(path))
			}
			v, err := toJSONValue(val, joinPath(path, k.Value), depth+1)
			if err != nil {
				return nil, err
			}
			m[k.Value] = v
		}
		return m, nil
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			v, err := toJSONValue(c, fmt.Sprintf("%s[%d]", path, i), depth+1)
			if err != nil {
				return nil, err
			}
			s = append(s, v)
		}
		return s, nil
	case yaml.ScalarNode:
		return scalarValue(n, path)
	default:
		return nil, refusalf("", RuleFrontmatter, "unsupported YAML node at %s", displayPath(path))
	}
}

// scalarValue converts a YAML scalar by its resolved tag.
func scalarValue(n *yaml.Node, path string) (any, error) {
	switch n.ShortTag() {
	case "!!str", "!!timestamp":
		return n.Value, nil
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, refusalf("", RuleFrontmatter, "frontmatter value at %s is not a boolean: %v", displayPath(path), err)
		}
		return b, nil
	case "!!int":
		var i int64
		if err := n.Decode(&i); err != nil || i > maxSafeInteger || i < -maxSafeInteger {
			return nil, refusalf("", RuleFrontmatter, "frontmatter integer at %s is out of range; quote it to keep it as text", displayPath(path))
		}
		return i, nil
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, refusalf("", RuleFrontmatter, "frontmatter number at %s has no JSON form; quote it to keep it as text", displayPath(path))
		}
		return f, nil
	default:
		return nil, refusalf("", RuleFrontmatter, "frontmatter value at %s has unsupported YAML tag %q", displayPath(path), n.Tag)
	}
}

func joinPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func displayPath(p string) string {
	if p == "" {
		return "the top level"
	}
	return p
}

// normalizeKey folds a key for the authority check: "Allowed_Tools",
// "allowed-tools" and "allowedTools" are the same request.
func normalizeKey(k string) string {
	k = strings.ToLower(k)
	return strings.NewReplacer("-", "", "_", "", " ", "").Replace(k)
}

// checkKeys refuses authority-granting keys first, then unknown keys, at the
// top level and inside metadata. Keys are visited in sorted order so the
// reported key does not depend on map iteration.
func checkKeys(fields map[string]any) error {
	meta, _ := fields["metadata"].(map[string]any)
	for _, scope := range []struct {
		prefix string
		m      map[string]any
	}{{"", fields}, {"metadata.", meta}} {
		for _, k := range sortedKeys(scope.m) {
			if authorityKeys[normalizeKey(k)] {
				return refusalf("", RuleGrantsAuthority, "frontmatter key %q asks for tools or permissions; a served skill carries instructions only and grants no authority, so remove the key", scope.prefix+k)
			}
		}
	}
	for _, k := range sortedKeys(fields) {
		if !contains(allowedTopKeys, k) {
			return refusalf("", RuleUnknownKey, "frontmatter key %q is not allowed (allowed: %s)", k, strings.Join(allowedTopKeys, ", "))
		}
	}
	for _, k := range sortedKeys(meta) {
		if !contains(allowedMetadataKeys, k) {
			return refusalf("", RuleUnknownKey, "frontmatter key %q is not allowed (allowed in metadata: %s)", "metadata."+k, strings.Join(allowedMetadataKeys, ", "))
		}
	}
	return nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// validateName applies the Agent Skills naming rules to the name field.
func validateName(v any) (string, error) {
	if v == nil {
		return "", refusalf("", RuleName, "frontmatter has no name; add name: <folder name>")
	}
	s, ok := v.(string)
	if !ok {
		return "", refusalf("", RuleName, "frontmatter name must be a string")
	}
	if why := nameProblem(s); why != "" {
		return "", refusalf("", RuleName, "frontmatter name %q %s", s, why)
	}
	return s, nil
}

// nameProblem returns why s is not a valid Agent Skills name, or "".
func nameProblem(s string) string {
	switch {
	case s == "":
		return "is empty"
	case len(s) > MaxNameLength:
		return fmt.Sprintf("is longer than %d characters", MaxNameLength)
	case s[0] == '-' || s[len(s)-1] == '-':
		return "starts or ends with '-'"
	case strings.Contains(s, "--"):
		return "contains '--'"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return "may use only lowercase letters a-z, digits and '-'"
		}
	}
	return ""
}

func validateDescription(v any) (string, error) {
	s, ok := v.(string)
	switch {
	case v == nil:
		return "", refusalf("", RuleDescription, "frontmatter has no description")
	case !ok:
		return "", refusalf("", RuleDescription, "frontmatter description must be a string")
	case strings.TrimSpace(s) == "":
		return "", refusalf("", RuleDescription, "frontmatter description is blank")
	case utf8.RuneCountInString(s) > MaxDescriptionLength:
		return "", refusalf("", RuleDescription, "frontmatter description has %d characters, more than %d", utf8.RuneCountInString(s), MaxDescriptionLength)
	}
	return s, nil
}

// parseMetadata reads the recognised metadata fields. A malformed private
// flag refuses the skill: guessing would risk publishing a private skill.
func parseMetadata(v any) (Metadata, error) {
	var md Metadata
	if v == nil {
		return md, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return md, refusalf("", RuleFrontmatter, "metadata must be a mapping")
	}
	for _, key := range []string{"version", "requirements"} {
		raw, present := m[key]
		if !present {
			continue
		}
		s, isStr := raw.(string)
		if !isStr {
			return md, refusalf("", RuleFrontmatter, "metadata.%s must be a string; quote it, for example %s: \"1.0\"", key, key)
		}
		if key == "version" {
			md.Version = s
		} else {
			md.Requirements = s
		}
	}
	if raw, present := m["provenance"]; present {
		p, err := parseProvenance(raw)
		if err != nil {
			return md, err
		}
		md.Provenance = p
	}
	if raw, present := m["private"]; present {
		switch p := raw.(type) {
		case bool:
			md.Private = p
		case string:
			switch p {
			case "true":
				md.Private = true
			case "false":
				md.Private = false
			default:
				return md, refusalf("", RuleFrontmatter, "metadata.private must be true or false, not %q", p)
			}
		default:
			return md, refusalf("", RuleFrontmatter, "metadata.private must be true or false")
		}
	}
	return md, nil
}

// parseProvenance accepts a mapping {source, revision?} or a plain string,
// which is the source (Agent Skills metadata values are strings).
func parseProvenance(v any) (*Provenance, error) {
	switch p := v.(type) {
	case string:
		if strings.TrimSpace(p) == "" {
			return nil, refusalf("", RuleFrontmatter, "metadata.provenance is blank")
		}
		return &Provenance{Source: p}, nil
	case map[string]any:
		for _, k := range sortedKeys(p) {
			if !contains(allowedProvenance, k) {
				return nil, refusalf("", RuleUnknownKey, "frontmatter key %q is not allowed (allowed in metadata.provenance: %s)", "metadata.provenance."+k, strings.Join(allowedProvenance, ", "))
			}
		}
		src, ok := p["source"].(string)
		if !ok || strings.TrimSpace(src) == "" {
			return nil, refusalf("", RuleFrontmatter, "metadata.provenance.source must be a non-empty string")
		}
		prov := &Provenance{Source: src}
		if rev, present := p["revision"]; present {
			s, ok := rev.(string)
			if !ok {
				return nil, refusalf("", RuleFrontmatter, "metadata.provenance.revision must be a string; quote it")
			}
			prov.Revision = s
		}
		return prov, nil
	default:
		return nil, refusalf("", RuleFrontmatter, "metadata.provenance must be a mapping {source, revision} or a string")
	}
}
