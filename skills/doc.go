// Package skills loads operator-written skills from a folder and serves
// them read-only over MCP, per the Skills extension
// (io.modelcontextprotocol/skills, SEP-2640). A skill is a folder of
// instructions for worker agents: a SKILL.md (YAML frontmatter, then
// markdown) and optional supporting files. Skills carry metadata and
// instructions; they grant no authority to anyone.
//
// # Skill folders and URIs
//
// Every folder under the skills folder that holds a SKILL.md is a skill,
// however deep. Its skill path is its path relative to the skills folder
// (for example "acme/billing/refunds"); the last segment is the skill's
// name and must equal the frontmatter name; earlier segments are a free
// prefix of lowercase host-name characters. Each file is the resource
// skill://<skill path>/<file path>, SKILL.md included. Skills may nest;
// each is listed flat, and an enclosing skill's files include its nested
// skills' files, as SEP-2640 requires of a complete resource list.
//
// # What is served
//
// Load judges every skill folder once, at start, and keeps the accepted
// files in memory. Afterwards nothing reads the disk, so the digests and
// sizes published by skills/list and skills/get are always those of the
// bytes resources/read returns; to pick up changes, restart. Invariants:
//
//   - Only public, accepted skills are in a Set. A private skill
//     (metadata.private: true) is dropped before registration: never
//     listed, never readable, not in URIs. A malformed private flag
//     refuses the skill rather than guess.
//   - A refused skill serves nothing. Refusals are logged as warnings
//     naming the skill and the rule, and returned as Refusal values that
//     match one sentinel error per rule with errors.Is.
//   - A skill containing a refused or a private nested skill is refused
//     too (RuleNestedRefused, RuleNestedPrivate): its resources would
//     otherwise publish the nested skill's files.
//   - Reading, getting or listing the directory of a private, refused or
//     nonexistent skill gives the same -32602 error: the server does not
//     reveal that a hidden skill exists.
//   - Every method returns a result or a *jsonrpc.Error, never a nil result
//     (the SDK crashes on it) nor a plain error (sent as code 0).
//   - A Set is immutable and safe for concurrent use.
//
// # Rules
//
// A skill is refused, with the rule named, when any of these fail; the
// other skills still load:
//
//   - Frontmatter: SKILL.md begins with a "---" line and the YAML mapping
//     up to the next "---" line has name (Agent Skills rules: 1–64 of a-z,
//     0-9 and '-', no leading, trailing or doubled '-', equal to the folder
//     name) and description (non-blank, at most 1024 characters). Allowed
//     keys are name, description, license, compatibility and metadata;
//     allowed metadata keys are version, provenance ({source, revision} or
//     a string), requirements and private. Any other key is refused; keys
//     that ask for tools or permissions (allowed-tools, tools, permissions,
//     hooks, mcpServers, capabilities) are refused as RuleGrantsAuthority.
//     YAML anchors, aliases, merge keys, non-string keys, duplicate keys,
//     custom tags, non-finite numbers and integers beyond 2^53 are refused,
//     so the frontmatter renders as JSON without loss or expansion.
//   - Credentials: no file and no frontmatter value may carry a literal
//     credential: private key blocks, AWS access key IDs, GitHub, Slack,
//     Google and sk-style API keys, JSON Web Tokens, bearer tokens, URLs
//     with a password, and password/secret/token/api_key assignments of a
//     literal value. Prose about tokens, placeholders (<token>, ${TOKEN},
//     YOUR_API_KEY, ****) and code reading a secret from elsewhere pass.
//     Details name the file, line and kind, never the value.
//   - Internal hosts: no URL (or host:port) may point at loopback,
//     0.0.0.0, private (10/8, 172.16/12, 192.168/16, fc00::/7), link-local
//     (169.254/16, fe80::/10) or cloud metadata addresses, including
//     numeric forms such as http://2130706433/, nor at localhost or hosts
//     under .internal, .local, .corp, .lan, .localhost or .home.arpa.
//   - Bounds: SKILL.md at most MaxSkillMDBytes, at most MaxFilesPerSkill
//     files and MaxSkillBytes in total per skill, at most MaxSkills skills
//     (those past it in path order are refused).
//   - Files: only regular files and directories. Symbolic links are never
//     followed, inside a skill or leading to one, and are refused by name.
//     File names use URI-safe characters only, so a URI is its path byte
//     for byte. Hidden entries (names starting with '.') are skipped with
//     everything under them and are never served: they are VCS, editor and
//     OS files, not skill content.
//
// # Serving
//
// Register adds each file as a resource (SKILL.md as text/markdown with
// the frontmatter name and description; others typed by extension, text
// when valid UTF-8 without NUL, else blob) with _meta under MetaPrefix, and
// the custom methods skills/list, skills/get and resources/directory/read.
// The caller declares the capabilities: CapabilityValue under
// capabilities.extensions[ExtensionID], plus the resources capability.
//
// # Test fixtures
//
// testdata/fixture holds one folder per case. Provider-shaped fake secrets
// are never committed; tests build them by concatenation at run time, so
// secret scanning never flags this repository.
package skills
