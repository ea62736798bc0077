package code

import (
	"fmt"
	"slices"
	"strings"

	"github.com/execbox/execbox"
)

// Language is a programming language Run understands. Its values are the
// canonical names; ParseLanguage also accepts common aliases.
type Language string

// The supported languages.
const (
	Python     Language = "python"
	JavaScript Language = "javascript"
	TypeScript Language = "typescript"
	CSharp     Language = "csharp"
	Bash       Language = "bash"
	Sh         Language = "sh"
	Go         Language = "go"
	C          Language = "c"
	CPP        Language = "cpp"
)

// languages is every Language, sorted by name.
var languages = []Language{Bash, C, CPP, CSharp, Go, JavaScript, Python, Sh, TypeScript}

// aliases maps accepted spellings (lower case) to languages.
var aliases = map[string]Language{
	"python": Python, "python3": Python, "py": Python,
	"javascript": JavaScript, "js": JavaScript, "node": JavaScript, "nodejs": JavaScript,
	"typescript": TypeScript, "ts": TypeScript,
	"csharp": CSharp, "c#": CSharp, "cs": CSharp,
	"bash": Bash,
	"sh":   Sh, "shell": Sh,
	"go": Go, "golang": Go,
	"c":   C,
	"cpp": CPP, "c++": CPP, "cxx": CPP,
}

// Languages returns the supported languages, sorted by name.
func Languages() []Language { return slices.Clone(languages) }

// ParseLanguage returns the language called s, ignoring case and accepting
// aliases: py and python3 for python, js and node for javascript, ts for
// typescript, c# and cs for csharp, golang for go, c++ and cxx for cpp,
// shell for sh. An unknown name is an ErrInvalidArgument *FieldError for
// the field "language" listing the known languages.
func ParseLanguage(s string) (Language, error) {
	if l, ok := aliases[strings.ToLower(strings.TrimSpace(s))]; ok {
		return l, nil
	}
	if s == "" {
		return "", execbox.Invalid("language", "is required (one of %s)", knownLanguages())
	}
	return "", execbox.Invalid("language", "unknown language %q (known: %s)", s, knownLanguages())
}

func knownLanguages() string {
	names := make([]string, len(languages))
	for i, l := range languages {
		names[i] = string(l)
	}
	return strings.Join(names, ", ")
}

// String returns the canonical name.
func (l Language) String() string { return string(l) }

// Phase is a step of a run: compiling the source, or running the program.
type Phase string

// The phases of a run. Interpreted languages have only PhaseRun.
const (
	PhaseCompile Phase = "compile"
	PhaseRun     Phase = "run"
)

// mainFile is the name the source is written to in the run directory.
func (l Language) mainFile() string {
	switch l {
	case Python:
		return "main.py"
	case JavaScript:
		return "main.js"
	case TypeScript:
		return "main.ts"
	case CSharp:
		return "main.cs"
	case Bash, Sh:
		return "main.sh"
	case Go:
		return "main.go"
	case C:
		return "main.c"
	case CPP:
		return "main.cpp"
	}
	panic(fmt.Sprintf("code: no main file for language %q", string(l)))
}
