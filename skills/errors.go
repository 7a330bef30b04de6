package skills

import (
	"errors"
	"fmt"
)

// Rules a skill can break. Each is the Rule of a Refusal and has a sentinel
// error of the same meaning, so callers can test refusals with errors.Is.
const (
	RuleName            = "name"
	RuleNameMismatch    = "name-mismatch"
	RuleDescription     = "description"
	RuleFrontmatter     = "frontmatter"
	RuleUnknownKey      = "unknown-key"
	RuleGrantsAuthority = "grants-authority"
	RuleCredential      = "credential"
	RuleInternalHost    = "internal-host"
	RuleTooLarge        = "too-large"
	RuleTooManyFiles    = "too-many-files"
	RuleTooManySkills   = "too-many-skills"
	RuleSymlink         = "symlink"
	RuleNotRegular      = "not-regular"
	RulePath            = "path"
	RuleUnreadable      = "unreadable"
	RuleNestedRefused   = "nested-refused"
	RuleNestedPrivate   = "nested-private"
)

// Sentinel errors, one per rule. A Refusal unwraps to the sentinel of its Rule.
var (
	// ErrName: the skill folder name or frontmatter name breaks the Agent
	// Skills naming rules (1–64 of a-z, 0-9 and '-', no leading, trailing or
	// doubled '-').
	ErrName = errors.New("skill name breaks the Agent Skills naming rules")
	// ErrNameMismatch: frontmatter name differs from the skill folder name.
	ErrNameMismatch = errors.New("frontmatter name differs from the skill folder name")
	// ErrDescription: description missing, blank or over 1024 characters.
	ErrDescription = errors.New("skill description must be non-empty text of at most 1024 characters")
	// ErrFrontmatter: SKILL.md has no well-formed YAML frontmatter mapping,
	// or a field has the wrong type.
	ErrFrontmatter = errors.New("SKILL.md frontmatter is malformed")
	// ErrUnknownKey: a frontmatter or metadata key outside the allowed set.
	ErrUnknownKey = errors.New("frontmatter key outside the allowed set")
	// ErrGrantsAuthority: the frontmatter asks for tools or permissions
	// (allowed-tools and the like). Skills carry instructions, never authority.
	ErrGrantsAuthority = errors.New("skill asks for tools or permissions; skills grant no authority")
	// ErrCredential: a file or the frontmatter carries something that looks
	// like a literal credential (key, token, password).
	ErrCredential = errors.New("skill carries a credential")
	// ErrInternalHost: a file or the frontmatter points at a loopback,
	// private, link-local or internal host, or a cloud metadata endpoint.
	ErrInternalHost = errors.New("skill points at an internal host or provider endpoint")
	// ErrTooLarge: SKILL.md over MaxSkillMDBytes or the skill over MaxSkillBytes.
	ErrTooLarge = errors.New("skill is too large")
	// ErrTooManyFiles: more than MaxFilesPerSkill files.
	ErrTooManyFiles = errors.New("skill has too many files")
	// ErrTooManySkills: the folder holds more than MaxSkills skills; the
	// ones past the bound, in path order, are refused.
	ErrTooManySkills = errors.New("too many skills in the folder")
	// ErrSymlink: a symbolic link inside the skills folder; links are never followed.
	ErrSymlink = errors.New("symbolic links are not followed")
	// ErrNotRegular: a device, socket, pipe or other non-regular file.
	ErrNotRegular = errors.New("only regular files and directories are served")
	// ErrPath: a skill path or file path that cannot be a clean skill URI.
	ErrPath = errors.New("path cannot be served as a skill URI")
	// ErrUnreadable: a file or directory could not be read, or changed while loading.
	ErrUnreadable = errors.New("skill file could not be read")
	// ErrNestedRefused: a skill nested inside this one was refused; its files
	// are part of this skill's resources, so this skill is refused too.
	ErrNestedRefused = errors.New("a nested skill was refused")
	// ErrNestedPrivate: a private skill is nested inside this public one;
	// serving this skill would publish the private skill's files.
	ErrNestedPrivate = errors.New("a private skill is nested inside a public one")

	// ErrTreeTooLarge is returned by Load, not refused: the folder holds more
	// than MaxWalkEntries entries, which means it is not a skills folder.
	ErrTreeTooLarge = errors.New("skills folder has too many entries")
)

var ruleErrors = map[string]error{
	RuleName:            ErrName,
	RuleNameMismatch:    ErrNameMismatch,
	RuleDescription:     ErrDescription,
	RuleFrontmatter:     ErrFrontmatter,
	RuleUnknownKey:      ErrUnknownKey,
	RuleGrantsAuthority: ErrGrantsAuthority,
	RuleCredential:      ErrCredential,
	RuleInternalHost:    ErrInternalHost,
	RuleTooLarge:        ErrTooLarge,
	RuleTooManyFiles:    ErrTooManyFiles,
	RuleTooManySkills:   ErrTooManySkills,
	RuleSymlink:         ErrSymlink,
	RuleNotRegular:      ErrNotRegular,
	RulePath:            ErrPath,
	RuleUnreadable:      ErrUnreadable,
	RuleNestedRefused:   ErrNestedRefused,
	RuleNestedPrivate:   ErrNestedPrivate,
}

// Refusal says why a skill (or an entry of the skills folder) is not served.
// It is an error that matches the sentinel of its Rule with errors.Is.
// Detail never repeats a secret value; it names the file and line instead.
type Refusal struct {
	// Skill is the skill path relative to the skills folder, with '/'
	// separators (for example "acme/billing/refunds"); for an entry outside
	// any skill, such as a symbolic link, it is that entry's path.
	Skill string `json:"skill"`
	// Rule is one of the Rule constants.
	Rule string `json:"rule"`
	// Detail explains the breach for an operator: which file, field or line.
	Detail string `json:"detail"`
}

// Error implements error.
func (r Refusal) Error() string {
	msg := r.Rule
	if err := ruleErrors[r.Rule]; err != nil {
		msg = err.Error()
	}
	return fmt.Sprintf("skill %s refused: %s: %s", r.Skill, msg, r.Detail)
}

// Unwrap returns the sentinel error of the refusal's Rule.
func (r Refusal) Unwrap() error { return ruleErrors[r.Rule] }

// refusalf builds a Refusal.
func refusalf(skill, rule, format string, args ...any) *Refusal {
	return &Refusal{Skill: skill, Rule: rule, Detail: fmt.Sprintf(format, args...)}
}
