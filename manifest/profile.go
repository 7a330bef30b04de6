package manifest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/graph-engineering/graph-engineering-mcp/taskgraph/jcs"
)

// MaxProfileBytes bounds a profile file read by LoadProfile.
const MaxProfileBytes = 64 << 10

// ErrInvalidProfile reports a profile that ParseProfile or LoadProfile
// refused. The wrapping error names the key or value and the rule.
var ErrInvalidProfile = errors.New("invalid profile")

// Profile keys, as written in a profile file.
const (
	keyAllowedTools   = "allowed_tools"
	keyResources      = "resources"
	keyTasksExtension = "tasks_extension"
	keySkills         = "skills"
)

// profileKeys lists the keys a profile may contain, ascending.
var profileKeys = []string{keyAllowedTools, keyResources, keySkills, keyTasksExtension}

// Profile is an operator's narrowing of the server surface. A profile can
// only remove authority: it selects a subset of the seven tools and can
// switch off resources, the tasks extension and skills, never add anything.
//
// The zero Profile allows nothing. DefaultProfile allows everything;
// ParseProfile starts from it, so a key absent from a profile file leaves
// that part of the surface as it is.
type Profile struct {
	// AllowedTools are the tools that may be exposed.
	AllowedTools []string `json:"allowed_tools"`
	// Resources allows MCP resources (the skills are resources).
	Resources bool `json:"resources"`
	// TasksExtension allows the MCP tasks extension.
	TasksExtension bool `json:"tasks_extension"`
	// Skills allows the MCP skills extension.
	Skills bool `json:"skills"`
}

// DefaultProfile is the widest profile: all seven tools, resources, the
// tasks extension and skills.
func DefaultProfile() Profile {
	return Profile{AllowedTools: allTools(), Resources: true, TasksExtension: true, Skills: true}
}

// Effective returns the profile as the server applies it:
//
//   - AllowedTools is sorted, deduplicated, and stripped of names that are
//     not tools of this server (a profile cannot add a tool), and is never
//     nil.
//   - TasksExtension stays true only if both graph_task_create and
//     graph_task_inspect are allowed, because the extension surfaces tasks
//     through them.
//   - Skills stays true only if Resources is true, because skills are
//     served as resources.
//
// Effective never widens p, and p.Effective().Effective() equals
// p.Effective().
func (p Profile) Effective() Profile {
	tools := make([]string, 0, len(p.AllowedTools))
	for _, t := range p.AllowedTools {
		if isTool(t) {
			tools = append(tools, t)
		}
	}
	tools = sortedUnique(tools)
	return Profile{
		AllowedTools: tools,
		Resources:    p.Resources,
		TasksExtension: p.TasksExtension &&
			slices.Contains(tools, ToolCreate) && slices.Contains(tools, ToolInspect),
		Skills: p.Skills && p.Resources,
	}
}

// ParseProfile parses a profile: one JSON object with any of the keys
// allowed_tools (an array of tool names), resources, tasks_extension and
// skills (booleans). Absent keys keep DefaultProfile's value, so "{}" is the
// default profile.
//
// Parsing is strict; each of these is an error matching ErrInvalidProfile
// that names the offending key or value: malformed JSON or a duplicate key,
// a top level that is not an object, an unknown key (the error lists the
// allowed ones), a value of the wrong type (null included), an unknown tool
// name (the error lists the seven), a tool listed twice, and an explicit
// "tasks_extension": true or "skills": true that the same profile makes
// impossible (by dropping graph_task_create or graph_task_inspect, or by
// "resources": false). The result is in Effective form.
func ParseProfile(data []byte) (Profile, error) {
	root, err := jcs.Parse(data)
	if err != nil {
		return Profile{}, fmt.Errorf("%w: %w", ErrInvalidProfile, err)
	}
	if root.Kind != jcs.KindObject {
		return Profile{}, fmt.Errorf("%w: must be a JSON object (got %s)", ErrInvalidProfile, root.Kind)
	}
	// Presence matters: nil means "not narrowed".
	var (
		tools                    []string
		resources, tasks, skills *bool
	)
	for _, m := range root.Members {
		switch m.Name {
		case keyAllowedTools:
			if tools, err = parseToolList(m.Val); err != nil {
				return Profile{}, err
			}
		case keyResources:
			if resources, err = parseBool(m.Name, m.Val); err != nil {
				return Profile{}, err
			}
		case keyTasksExtension:
			if tasks, err = parseBool(m.Name, m.Val); err != nil {
				return Profile{}, err
			}
		case keySkills:
			if skills, err = parseBool(m.Name, m.Val); err != nil {
				return Profile{}, err
			}
		default:
			return Profile{}, fmt.Errorf("%w: unknown key %q; the allowed keys are %s",
				ErrInvalidProfile, m.Name, strings.Join(profileKeys, ", "))
		}
	}
	p := DefaultProfile()
	if tools != nil {
		p.AllowedTools = tools
	}
	if resources != nil {
		p.Resources = *resources
	}
	if tasks != nil {
		p.TasksExtension = *tasks
	}
	if skills != nil {
		p.Skills = *skills
	}
	e := p.Effective()
	if tasks != nil && *tasks && !e.TasksExtension {
		return Profile{}, fmt.Errorf("%w: %s is true but %s does not allow both %s and %s, which the tasks extension needs",
			ErrInvalidProfile, keyTasksExtension, keyAllowedTools, ToolCreate, ToolInspect)
	}
	if skills != nil && *skills && !e.Skills {
		return Profile{}, fmt.Errorf("%w: %s is true but %s is false; skills are served as resources",
			ErrInvalidProfile, keySkills, keyResources)
	}
	return e, nil
}

// parseBool reads a boolean profile value.
func parseBool(key string, v jcs.Value) (*bool, error) {
	if v.Kind != jcs.KindBool {
		return nil, fmt.Errorf("%w: %s must be a boolean (got %s)", ErrInvalidProfile, key, v.Kind)
	}
	b := v.Bool
	return &b, nil
}

// parseToolList reads allowed_tools. The result is non-nil, so an empty
// array is told apart from an absent key.
func parseToolList(v jcs.Value) ([]string, error) {
	if v.Kind != jcs.KindArray {
		return nil, fmt.Errorf("%w: %s must be an array of tool names (got %s)", ErrInvalidProfile, keyAllowedTools, v.Kind)
	}
	tools := make([]string, 0, len(v.Elems))
	for i, e := range v.Elems {
		if e.Kind != jcs.KindString {
			return nil, fmt.Errorf("%w: %s[%d] must be a string (got %s)", ErrInvalidProfile, keyAllowedTools, i, e.Kind)
		}
		if !isTool(e.Str) {
			return nil, fmt.Errorf("%w: %s[%d]: unknown tool %q; the tools are %s",
				ErrInvalidProfile, keyAllowedTools, i, e.Str, strings.Join(allTools(), ", "))
		}
		if slices.Contains(tools, e.Str) {
			return nil, fmt.Errorf("%w: %s lists %q twice", ErrInvalidProfile, keyAllowedTools, e.Str)
		}
		tools = append(tools, e.Str)
	}
	return tools, nil
}

// LoadProfile reads the profile file at path and parses it with
// ParseProfile. A file longer than MaxProfileBytes is refused (matching
// ErrInvalidProfile) without reading past the bound; a file that cannot be
// read yields the operating system's error (for example one matching
// fs.ErrNotExist), which names the path. Every error names the path once.
func LoadProfile(path string) (Profile, error) {
	// The operating system's errors name the path already.
	f, err := os.Open(path)
	if err != nil {
		return Profile{}, fmt.Errorf("read profile: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxProfileBytes+1))
	if err != nil {
		return Profile{}, fmt.Errorf("read profile: %w", err)
	}
	if len(data) > MaxProfileBytes {
		return Profile{}, fmt.Errorf("%w: %s is larger than %d bytes", ErrInvalidProfile, path, MaxProfileBytes)
	}
	p, err := ParseProfile(data)
	if err != nil {
		return Profile{}, fmt.Errorf("profile %s: %w", path, err)
	}
	return p, nil
}
