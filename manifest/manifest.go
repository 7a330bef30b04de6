package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/graph-engineering/graph-engineering-mcp/lease"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/jcs"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/limits"
)

// ErrInvalidJSON matches the error of input that RFC 8785 cannot
// canonicalize (see jcs.ErrInvalidJSON): a profile, a manifest or a value
// to digest.
var ErrInvalidJSON = jcs.ErrInvalidJSON

// ErrInvalidManifest reports a surface or limits that Build cannot describe
// truthfully, or bytes that Verify does not accept as a manifest. The
// wrapping error names the field and the rule.
var ErrInvalidManifest = errors.New("invalid manifest")

// Top-level keys of a manifest, ascending. A manifest has exactly these.
const (
	mkeyHumanOnly       = "humanOnlyOperationsExposed"
	mkeyLimits          = "limits"
	mkeyProtocols       = "protocols"
	mkeyResources       = "resources"
	mkeySHA256          = "sha256"
	mkeySkillURIs       = "skillUris"
	mkeySkillsExtension = "skillsExtension"
	mkeyTasksExtension  = "tasksExtension"
	mkeyTools           = "tools"
	mkeyUIExtension     = "uiExtension"
)

// ManifestKeys lists the top-level keys of every manifest, ascending.
func ManifestKeys() []string {
	return []string{mkeyHumanOnly, mkeyLimits, mkeyProtocols, mkeyResources, mkeySHA256,
		mkeySkillURIs, mkeySkillsExtension, mkeyTasksExtension, mkeyTools, mkeyUIExtension}
}

// maxExactInteger is 2^53 - 1 (ECMAScript's Number.MAX_SAFE_INTEGER): every
// integer from 0 up to it is exactly one IEEE 754 double, so RFC 8785
// canonicalization writes it unchanged and every JSON reader reads it back.
const maxExactInteger = 1<<53 - 1

// extraLimitName is the rule for extra limit names: lowerCamelCase, like
// the built-in ones.
var extraLimitName = regexp.MustCompile(`^[a-z][A-Za-z0-9]{0,63}$`)

// Manifest is a built capability manifest: its exact bytes and their
// digest. The zero Manifest is empty; build one with Build.
type Manifest struct {
	bytes  []byte
	sha256 string
}

// manifestDoc is the manifest object. SHA256 is empty while the digest is
// computed, and omitted then.
type manifestDoc struct {
	HumanOnlyOperationsExposed bool           `json:"humanOnlyOperationsExposed"`
	Limits                     map[string]any `json:"limits"`
	Protocols                  []string       `json:"protocols"`
	Resources                  bool           `json:"resources"`
	SHA256                     string         `json:"sha256,omitempty"`
	SkillURIs                  []string       `json:"skillUris"`
	SkillsExtension            bool           `json:"skillsExtension"`
	TasksExtension             bool           `json:"tasksExtension"`
	Tools                      []string       `json:"tools"`
	UIExtension                bool           `json:"uiExtension"`
}

// bounds is a {min, max, default} limit.
type bounds struct {
	Default int64 `json:"default"`
	Max     int64 `json:"max"`
	Min     int64 `json:"min"`
}

// storeLimits returns the store's bounds as the manifest states them.
// Bounds of graph_task_inspect's workflow outline (workflow_id alone),
// which the adapter enforces: at most MaxOutlineTasks tasks and at most
// MaxOutlineBytes bytes of their JSON in one answer.
const (
	MaxOutlineTasks = 1000
	MaxOutlineBytes = 512 << 10
)

func storeLimits() map[string]any {
	return map[string]any{
		"identifierPattern":   limits.IdentifierPattern,
		"maxIdentifierLength": int64(limits.MaxIdentifierLen),
		"maxPayloadBytes":     int64(limits.MaxPayloadBytes),
		"maxResultBytes":      int64(limits.MaxResultBytes),
		"maxErrorBytes":       int64(limits.MaxErrorBytes),
		"maxJsonDepth":        int64(limits.MaxJSONDepth),
		"maxDependsOn":        int64(limits.MaxDependsOn),
		"maxTasksPerWorkflow": int64(limits.MaxTasksPerWorkflow),
		"maxCreateNodes":      int64(limits.MaxCreateNodes),
		"maxCreateBytes":      int64(limits.MaxCreateBytes),
		"maxAttempts": bounds{
			Min:     limits.MinMaxAttempts,
			Max:     limits.MaxMaxAttempts,
			Default: limits.DefaultMaxAttempts,
		},
		"leaseMs": bounds{
			Min:     lease.MinDuration.Milliseconds(),
			Max:     lease.MaxDuration.Milliseconds(),
			Default: lease.DefaultDuration.Milliseconds(),
		},
		"maxWaitMs":                limits.MaxClaimWait.Milliseconds(),
		"maxDependencyResultBytes": int64(limits.MaxDependencyResultBytes),
		"maxOutlineTasks":          int64(MaxOutlineTasks),
		"maxOutlineBytes":          int64(MaxOutlineBytes),
		"priority":                 bounds{Min: limits.MinPriority, Max: limits.MaxPriority, Default: 0},
		"tagPattern":               limits.TagPattern,
		"maxRequires":              int64(limits.MaxRequires),
		"maxCapabilities":          int64(limits.MaxCapabilities),
		"retryDelayMs":             bounds{Min: 0, Max: limits.MaxRetryDelay.Milliseconds(), Default: limits.DefaultRetryDelay.Milliseconds()},
		"maxRetryAfterMs":          limits.MaxRetryAfter.Milliseconds(),
		"maxNotBeforeMs":           limits.MaxNotBefore.Milliseconds(),
	}
}

// Build describes surface s as a manifest: a JSON object with exactly the
// keys of ManifestKeys:
//
//   - protocols: Protocols;
//   - tools: s.Tools, ascending;
//   - resources, tasksExtension, skillsExtension, uiExtension: from s;
//   - skillUris: s.SkillURIs, ascending ([] when none);
//   - limits: the store's bounds (identifierPattern, maxIdentifierLength,
//     maxPayloadBytes, maxResultBytes, maxErrorBytes, maxJsonDepth,
//     maxDependsOn, maxTasksPerWorkflow, maxCreateNodes and
//     maxCreateBytes (a whole-graph submit's bounds), maxAttempts and leaseMs as
//     {min, max, default}, maxWaitMs, maxDependencyResultBytes, priority as
//     {min, max, default}, tagPattern, maxRequires, maxCapabilities,
//     retryDelayMs as {min, max, default}, maxRetryAfterMs,
//     maxNotBeforeMs, and the workflow outline's maxOutlineTasks and
//     maxOutlineBytes), plus extraLimits, the transport's
//     own bounds (for example maxStdioLineBytes);
//   - humanOnlyOperationsExposed: false, always;
//   - sha256: Digest of the RFC 8785 form of the object without sha256.
//
// Build refuses, with an error matching ErrInvalidManifest, a surface that
// is not self-consistent (an unknown or repeated tool, the tasks extension
// without graph_task_create and graph_task_inspect, skills without
// resources, skill URIs without the skills extension, an empty, repeated or
// non-UTF-8 skill URI) and an extra limit whose name is not lowerCamelCase
// ASCII of at most 64 characters, repeats a built-in limit, or whose value
// is outside [0, 2^53-1].
func Build(s Surface, extraLimits map[string]int64) (Manifest, error) {
	tools, err := checkTools(s.Tools)
	if err != nil {
		return Manifest{}, err
	}
	if s.TasksExtension && !(slices.Contains(tools, ToolCreate) && slices.Contains(tools, ToolInspect)) {
		return Manifest{}, fmt.Errorf("%w: tasksExtension is true but tools does not include both %s and %s",
			ErrInvalidManifest, ToolCreate, ToolInspect)
	}
	if s.SkillsExtension && !s.Resources {
		return Manifest{}, fmt.Errorf("%w: skillsExtension is true but resources is false", ErrInvalidManifest)
	}
	if s.UIExtension && !(s.Resources && slices.Contains(tools, ToolInspect)) {
		return Manifest{}, fmt.Errorf("%w: uiExtension is true but resources is false or tools does not include %s", ErrInvalidManifest, ToolInspect)
	}
	uris, err := checkSkillURIs(s)
	if err != nil {
		return Manifest{}, err
	}
	limits := storeLimits()
	for name, v := range extraLimits {
		if !extraLimitName.MatchString(name) {
			return Manifest{}, fmt.Errorf("%w: extra limit name %q must match %s", ErrInvalidManifest, name, extraLimitName)
		}
		if _, ok := limits[name]; ok {
			return Manifest{}, fmt.Errorf("%w: extra limit %q repeats a store limit", ErrInvalidManifest, name)
		}
		if v < 0 || v > maxExactInteger {
			return Manifest{}, fmt.Errorf("%w: extra limit %q must be between 0 and %d (got %d)",
				ErrInvalidManifest, name, int64(maxExactInteger), v)
		}
		limits[name] = v
	}
	doc := manifestDoc{
		HumanOnlyOperationsExposed: false,
		Limits:                     limits,
		Protocols:                  protocols(),
		Resources:                  s.Resources,
		SkillURIs:                  uris,
		SkillsExtension:            s.SkillsExtension,
		TasksExtension:             s.TasksExtension,
		Tools:                      tools,
		UIExtension:                s.UIExtension,
	}
	sha, err := DigestJSON(doc)
	if err != nil {
		return Manifest{}, fmt.Errorf("%w: %w", ErrInvalidManifest, err)
	}
	doc.SHA256 = sha
	b, err := jcs.CanonicalizeValue(doc)
	if err != nil {
		return Manifest{}, fmt.Errorf("%w: %w", ErrInvalidManifest, err)
	}
	return Manifest{bytes: b, sha256: sha}, nil
}

// checkTools returns a sorted copy of tools after checking that each is
// one of AllTools and none repeats.
func checkTools(in []string) ([]string, error) {
	tools := append([]string{}, in...)
	slices.Sort(tools)
	for i, t := range tools {
		if !isTool(t) {
			return nil, fmt.Errorf("%w: tools: unknown tool %q; the tools are %s",
				ErrInvalidManifest, t, strings.Join(allTools(), ", "))
		}
		if i > 0 && tools[i-1] == t {
			return nil, fmt.Errorf("%w: tools lists %q twice", ErrInvalidManifest, t)
		}
	}
	return tools, nil
}

// checkSkillURIs returns a sorted copy of s.SkillURIs, never nil, after
// checking them.
func checkSkillURIs(s Surface) ([]string, error) {
	if len(s.SkillURIs) > 0 && !s.SkillsExtension {
		return nil, fmt.Errorf("%w: skillUris lists %d URIs but skillsExtension is false", ErrInvalidManifest, len(s.SkillURIs))
	}
	uris := append([]string{}, s.SkillURIs...)
	slices.Sort(uris)
	for i, u := range uris {
		if u == "" || !utf8.ValidString(u) {
			return nil, fmt.Errorf("%w: skillUris: each URI must be non-empty valid UTF-8 (got %q)", ErrInvalidManifest, u)
		}
		if i > 0 && uris[i-1] == u {
			return nil, fmt.Errorf("%w: skillUris lists %q twice", ErrInvalidManifest, u)
		}
	}
	return uris, nil
}

// Bytes returns the manifest exactly as it is served and printed: its RFC
// 8785 form, sha256 included, with nothing before or after it (no trailing
// newline; a CLI that prints it adds its own, which is not part of the
// manifest). The result is a copy.
func (m Manifest) Bytes() []byte { return bytes.Clone(m.bytes) }

// SHA256 returns the manifest's digest, "sha256:" and 64 lowercase
// hexadecimal digits: the value of its sha256 key.
func (m Manifest) SHA256() string { return m.sha256 }

// Verify checks that b is a manifest as Build writes it and returns its
// digest: b must be in RFC 8785 canonical form, be an object with exactly
// the keys of ManifestKeys, and its sha256 must equal the Digest of its
// canonical form without sha256. It does not check the other values.
// Failures match ErrInvalidManifest.
func Verify(b []byte) (string, error) {
	root, err := jcs.Parse(b)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidManifest, err)
	}
	if root.Kind != jcs.KindObject {
		return "", fmt.Errorf("%w: must be a JSON object (got %s)", ErrInvalidManifest, root.Kind)
	}
	var canon bytes.Buffer
	jcs.WriteCanonical(&canon, root)
	if !bytes.Equal(canon.Bytes(), b) {
		return "", fmt.Errorf("%w: not in RFC 8785 canonical form", ErrInvalidManifest)
	}
	names := make([]string, len(root.Members))
	for i, m := range root.Members {
		names[i] = m.Name
	}
	if !slices.Equal(names, ManifestKeys()) {
		return "", fmt.Errorf("%w: keys are %s; want exactly %s",
			ErrInvalidManifest, strings.Join(names, ", "), strings.Join(ManifestKeys(), ", "))
	}
	i := slices.Index(names, mkeySHA256)
	claimed := root.Members[i].Val
	if claimed.Kind != jcs.KindString || !ValidDigest(claimed.Str) {
		return "", fmt.Errorf("%w: sha256 must be a string of the form sha256:<64 lowercase hex digits>", ErrInvalidManifest)
	}
	root.Members = slices.Delete(slices.Clone(root.Members), i, i+1)
	var body bytes.Buffer
	jcs.WriteCanonical(&body, root)
	if got := Digest(body.Bytes()); got != claimed.Str {
		return "", fmt.Errorf("%w: sha256 is %s but the manifest without it digests to %s", ErrInvalidManifest, claimed.Str, got)
	}
	return claimed.Str, nil
}
