package activities

// Where a tool call reaches: the runner tells the session whether the paths a permission
// request names lie inside the session's workspace, so that the policy never lets a read of
// /etc/shadow through as "harmless" (contract §10). The session decides; the runner, which
// sees the worker's file system, measures.

import (
	"encoding/json"
	"path/filepath"
	"strings"

	"github.com/tacp-dev/tacp/signals"
)

// pathKeys are the rawInput fields that name files or directories in the tools of the
// agents tacp runs (Claude Code's Read/Write/Edit/Grep/Glob/NotebookEdit, Codex's and
// Gemini's read_file/list_directory/search, OpenCode's): compared case-insensitively, with
// underscores and dashes ignored.
var pathKeys = map[string]bool{
	"path": true, "paths": true, "filepath": true, "filepaths": true, "file": true, "files": true,
	"filename": true, "absolutepath": true, "abspath": true, "notebookpath": true, "dir": true,
	"directory": true, "dirpath": true, "cwd": true, "workdir": true, "workingdirectory": true,
	"root": true, "target": true, "source": true, "destination": true, "dest": true,
	"from": true, "to": true, "location": true, "uri": true,
}

// patternKeys name globs (and grep patterns, which look alike): they count as paths, so that
// /etc/** or ../** is outside; a pattern that is no path at all resolves inside the
// workspace, where the search runs.
var patternKeys = map[string]bool{"pattern": true, "glob": true, "include": true}

// maxReachPaths bounds the paths looked at in one tool call.
const maxReachPaths = 64

// ToolCallReach reports where the paths a tool call names (its locations and the path-like
// fields of its rawInput, relative ones taken from workspace) lie: PathsInside when there is
// at least one and all resolve, symlinks included, inside workspace; PathsOutside when any
// does not; PathsNone when it names none. workspace is real (resolved); home expands "~".
func ToolCallReach(toolCall json.RawMessage, workspace, home string) string {
	var tc struct {
		Locations []struct {
			Path string `json:"path"`
		} `json:"locations"`
		RawInput json.RawMessage `json:"rawInput"`
	}
	_ = json.Unmarshal(toolCall, &tc)
	var paths []string
	for _, l := range tc.Locations {
		paths = append(paths, l.Path)
	}
	var raw any
	if json.Unmarshal(tc.RawInput, &raw) == nil {
		paths = collectPaths(raw, "", paths)
	}
	if len(paths) == 0 {
		return signals.PathsNone
	}
	if len(paths) > maxReachPaths {
		return signals.PathsOutside // too many to check: ask
	}
	for _, p := range paths {
		if !pathInside(p, workspace, home) {
			return signals.PathsOutside
		}
	}
	return signals.PathsInside
}

func normKey(k string) string {
	return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(k))
}

// collectPaths appends the path-like strings of v (under key) to out.
func collectPaths(v any, key string, out []string) []string {
	if len(out) > maxReachPaths {
		return out
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			out = collectPaths(e, normKey(k), out)
		}
	case []any:
		for _, e := range x {
			out = collectPaths(e, key, out)
		}
	case string:
		switch {
		case x == "":
		case pathKeys[key]:
			if strings.Contains(x, "://") && !strings.HasPrefix(x, "file://") {
				break // a URL: no local path
			}
			out = append(out, strings.TrimPrefix(x, "file://"))
		case patternKeys[key]:
			out = append(out, x)
		}
	}
	return out
}

// pathInside reports whether p, resolved against workspace (relative) or home ("~"), lies in
// workspace once its existing part's symlinks are resolved.
func pathInside(p, workspace, home string) bool {
	if strings.ContainsRune(p, 0) {
		return false
	}
	switch {
	case p == "~" || strings.HasPrefix(p, "~/"):
		if home == "" {
			return false
		}
		p = filepath.Join(home, strings.TrimPrefix(p, "~"))
	case strings.HasPrefix(p, "~"):
		return false // another user's home
	case !filepath.IsAbs(p):
		p = filepath.Join(workspace, p)
	}
	// A glob's wildcards name no file: check the directory part before the first one.
	if i := strings.IndexAny(p, "*?["); i >= 0 {
		p = filepath.Dir(p[:i] + "x")
	}
	real, err := realPath(filepath.Clean(p), 0)
	if err != nil {
		return false
	}
	_, ok := within(workspace, real)
	return ok
}
